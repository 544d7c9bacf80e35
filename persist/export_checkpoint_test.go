package persist

// CheckpointTombstones exposes checkpointTombstones to the package's
// external tests.
func (c *Collection) CheckpointTombstones(name string) ([]string, error) {
	return c.checkpointTombstones(name)
}
