// Package wire reads Kubernetes protobuf without decoding it, on
// google.golang.org/protobuf/encoding/protowire: the serializer's prefix
// and runtime.Unknown envelope (envelope.go), and a list response's
// metadata and items (list.go), from a buffer (field.go) or a stream
// (stream.go).
//
// # Basics
//
// It has two users. A Decoder (decoder.go) decodes watch events as its
// inner decoder does and remembers each object's protobuf message, its
// payload (payload.go); the persistent store takes the payload (Take) and
// stores it instead of marshalling the object again. Given the scheme
// (NegotiatedSerializer.Creater), it decodes the object from the payload in
// place, sparing the copy of it the serializer makes. The factory's lists
// are decoded in place too, from a buffer their next page reuses; a list's
// items have no payloads. ReadList reads a list
// response as it arrives, calling back with each item's identity and bytes,
// so that a recovery never holds a whole page decoded. PeekPrefix tells a
// body's format from its first bytes, before ReadList or another reader.
//
// Objects are looked up by identity: a payload is the server's encoding of
// exactly the state decoded into that object. It stays true while nothing
// changes the object, so the store takes payloads only when no transform
// runs between the decoder and the store. The payloads of objects never
// stored (a watch stopped, an object filtered out) are forgotten when newer
// ones need their room: at most Capacity are kept.
//
// Take, Forget, Stats and Decoder are safe for concurrent use. ReadList
// reads one stream on the caller's goroutine.
//
// # Caveats
//
// The reader accepts a subset of what the generated Unmarshal methods
// accept: groups, reserved wire types and overlong varints are rejected
// (ErrMalformed). A caller that gets ErrMalformed decodes the bytes whole,
// which then reports the decoder's own error, or finds none. A stream cut
// short anywhere is ErrMalformed wrapping io.ErrUnexpectedEOF, never a bare
// io.EOF, which a reflector's error handler takes for a normal close. That
// holds before and inside the prefix too (PeekPrefix): an empty body is cut.
//
// An Item's Raw is valid only until the item callback returns. A payload
// is a slice of the buffer the object was decoded from, which client-go's
// watch decoder allocates per event.
package wire
