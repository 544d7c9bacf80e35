package persist

// SetMinJournalBytes sets the journal a collection gathers before a fold
// whatever its size, so that tests see folds on a few objects. It returns a
// function restoring the default.
func SetMinJournalBytes(n int64) (restore func()) {
	old := minJournalBytes
	minJournalBytes = n
	return func() { minJournalBytes = old }
}

// SetFoldChunk makes every fold move n keys per commit (0: computed).
func SetFoldChunk(n int) (restore func()) {
	old := fixedFoldChunk
	fixedFoldChunk = n
	return func() { fixedFoldChunk = old }
}

// JournalState reports the collection's journal as loaded or last
// committed: the generations in the file and whether one is being folded.
func JournalState(c *Collection) (generations int, folding bool) {
	c.db.commitMu.Lock()
	defer c.db.commitMu.Unlock()
	return len(c.journal.gens), c.journal.foldKeys != nil
}
