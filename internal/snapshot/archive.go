package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/klauspost/compress/s2"
)

// Magic starts the archive (package comment).
const Magic = "NATSARC1"

// MaxNameLen is the longest entry name a Reader accepts (nats-server's
// archive.maxNameLen), so that a damaged length cannot make it allocate
// without bound.
const MaxNameLen = 1 << 20

// StateName is the name of the first entry, the stream's state.
const StateName = "state.json"

// ConsumerPrefix starts the name of a consumer's entry.
const ConsumerPrefix = "consumers/"

// Errors of the archive layer. Their texts are nats-server's, since a
// failed restore reports them to the client ("restore failed: <text>").
var (
	// ErrInvalid is a malformed archive: wrong magic, a negative or
	// overflowing size, a name too long, or an entry cut short.
	ErrInvalid = errors.New("archive: invalid archive stream")
	// ErrTruncated is an archive that ends before its end-of-snapshot
	// entry.
	ErrTruncated = errors.New("backup was truncated")
)

// Header describes one entry (package comment). The payload is
// HeaderSize+PayloadSize bytes.
type Header struct {
	Name        string
	Timestamp   int64
	Sequence    uint64
	HeaderSize  int64
	PayloadSize int64
}

// IsEnd reports whether h is the end-of-snapshot entry.
func (h *Header) IsEnd() bool {
	return h.Name == "" && h.Timestamp == 0 && h.Sequence == 0 && h.HeaderSize == 0 && h.PayloadSize == 0
}

// Writer writes a compressed archive to an io.Writer.
type Writer struct {
	enc        *s2.Writer
	wroteMagic bool
	tmp        [binary.MaxVarintLen64]byte
}

// NewWriter returns a Writer writing the S2 stream to w.
func NewWriter(w io.Writer) *Writer { return &Writer{enc: s2.NewWriter(w)} }

// WriteEntry writes one entry: h, whose sizes must add up to len(payload)
// (else an error is returned and nothing is written), and the payload.
func (w *Writer) WriteEntry(h Header, payload []byte) error {
	if h.HeaderSize < 0 || h.PayloadSize < 0 || h.HeaderSize > math.MaxInt64-h.PayloadSize || h.HeaderSize+h.PayloadSize != int64(len(payload)) {
		return fmt.Errorf("snapshot: entry %q: sizes %d+%d for %d bytes", h.Name, h.HeaderSize, h.PayloadSize, len(payload))
	}
	if !w.wroteMagic {
		if _, err := io.WriteString(w.enc, Magic); err != nil {
			return err
		}
		w.wroteMagic = true
	}
	if err := w.uvarint(uint64(len(h.Name))); err != nil {
		return err
	}
	n := binary.PutVarint(w.tmp[:], h.Timestamp)
	if _, err := w.enc.Write(w.tmp[:n]); err != nil {
		return err
	}
	for _, v := range []uint64{h.Sequence, uint64(h.HeaderSize), uint64(h.PayloadSize)} {
		if err := w.uvarint(v); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w.enc, h.Name); err != nil {
		return err
	}
	_, err := w.enc.Write(payload)
	return err
}

func (w *Writer) uvarint(v uint64) error {
	n := binary.PutUvarint(w.tmp[:], v)
	_, err := w.enc.Write(w.tmp[:n])
	return err
}

// Flush writes out what is buffered as whole S2 chunks, without ending
// the snapshot.
func (w *Writer) Flush() error { return w.enc.Flush() }

// End writes the end-of-snapshot entry and flushes and closes the
// compression; it does not close the underlying writer.
func (w *Writer) End() error {
	if err := w.WriteEntry(Header{}, nil); err != nil {
		return err
	}
	return w.enc.Close()
}

// Reader reads a compressed archive. Every error it returns is final.
type Reader struct {
	r   *bufio.Reader
	err error
	// MaxPayload bounds the payload of an entry (header and payload
	// together); larger entries fail with an error naming the entry. 0
	// means no bound.
	MaxPayload int64
	magic      bool
}

// NewReader returns a Reader decompressing the S2 stream r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReader(s2.NewReader(r))} }

// Next reads the next entry whole: its header and payload. It returns
// io.EOF when the archive ends cleanly between entries (a snapshot must
// end with the end-of-snapshot entry first: ErrTruncated is the caller's
// to report), ErrInvalid for malformed bytes, and the decompressor's
// error ("s2: corrupt input, crc mismatch", ...) for damaged ones.
func (rd *Reader) Next() (Header, []byte, error) {
	if rd.err != nil {
		return Header{}, nil, rd.err
	}
	h, p, err := rd.next()
	if err != nil {
		rd.err = err
	}
	return h, p, err
}

func (rd *Reader) next() (Header, []byte, error) {
	if !rd.magic {
		var m [len(Magic)]byte
		if _, err := io.ReadFull(rd.r, m[:]); err != nil {
			return Header{}, nil, eofAsInvalid(err, true)
		}
		if string(m[:]) != Magic {
			return Header{}, nil, ErrInvalid
		}
		rd.magic = true
	}
	nameLen, err := binary.ReadUvarint(rd.r)
	if err != nil {
		return Header{}, nil, eofAsInvalid(err, true) // a clean end between entries
	}
	var h Header
	if h.Timestamp, err = binary.ReadVarint(rd.r); err != nil {
		return Header{}, nil, eofAsInvalid(err, false)
	}
	var sizes [3]uint64
	for i := range sizes {
		if sizes[i], err = binary.ReadUvarint(rd.r); err != nil {
			return Header{}, nil, eofAsInvalid(err, false)
		}
	}
	h.Sequence, h.HeaderSize, h.PayloadSize = sizes[0], int64(sizes[1]), int64(sizes[2])
	total := h.HeaderSize + h.PayloadSize
	if nameLen > MaxNameLen || h.HeaderSize < 0 || h.PayloadSize < 0 || total < 0 {
		return Header{}, nil, ErrInvalid
	}
	name, err := io.ReadAll(io.LimitReader(rd.r, int64(nameLen)))
	if err != nil {
		return Header{}, nil, eofAsInvalid(err, false)
	}
	if uint64(len(name)) != nameLen {
		return Header{}, nil, ErrInvalid
	}
	h.Name = string(name)
	if rd.MaxPayload > 0 && total > rd.MaxPayload {
		return Header{}, nil, fmt.Errorf("snapshot entry %q (sequence %d) of %d bytes exceeds the maximum of %d", h.Name, h.Sequence, total, rd.MaxPayload)
	}
	// Read what is there rather than allocate what the sizes claim: a
	// damaged size costs no more memory than the bytes that follow it.
	p, err := io.ReadAll(io.LimitReader(rd.r, total))
	if err != nil {
		return Header{}, nil, eofAsInvalid(err, false)
	}
	if int64(len(p)) != total {
		return Header{}, nil, ErrInvalid
	}
	return h, p, nil
}

// eofAsInvalid maps the end of the input to ErrInvalid inside an entry,
// and keeps a clean io.EOF where an entry may start (clean). Other errors
// (the decompressor's) pass unchanged.
func eofAsInvalid(err error, clean bool) error {
	switch {
	case clean && err == io.EOF:
		return io.EOF
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrInvalid
	}
	return err
}
