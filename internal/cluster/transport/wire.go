package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// frameHeader is the length prefix of a frame (package comment).
const frameHeader = 4

// readChunk is how much of a frame body is read (and allocated) at a time:
// a length the peer does not follow with bytes costs no more memory than
// the bytes it did send.
const readChunk = 1 << 20

// errBadLength: a frame length of 0 or above the limit (the connection
// closes).
var errBadLength = errors.New("transport: bad frame length")

// hello is the dialer's first line after RAFT (package comment).
type hello struct {
	V       int    `json:"v"`
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	User    string `json:"user,omitempty"`
	Pass    string `json:"pass,omitempty"`
	// Inc and Tags are the dialer's store incarnation (32 hexadecimal
	// digits) and server_tags (Config.Incarnation, Config.Tags): the meta
	// leader's catalogue of servers records them (PeerIncarnation).
	Inc  string   `json:"inc,omitempty"`
	Tags []string `json:"tags,omitempty"`
	// Known is the dialer's catalogue when it dialed: the store
	// incarnation it knows for each server (Config.Known; PeerKnown). A
	// server whose own store is not the one the cluster knows it by was
	// wiped or replaced: it must not rejoin as its old self.
	Known map[string]string `json:"known,omitempty"`
	// Meta: the dialer ran the meta group when it dialed (Config.Meta);
	// Members: the servers its routes name, itself included, once they
	// all resolved (Config.Members). A server without a meta group reads
	// them to decide whether to bootstrap one or wait to be added
	// (docs/cluster.md, "Growing the meta group"; PeerMeta).
	Meta    bool     `json:"meta,omitempty"`
	Members []string `json:"members,omitempty"`
	// Level is the dialer's build's feature level (FeatureLevel); a
	// build from before levels sends none (0).
	Level int `json:"level,omitempty"`
}

// appendHello appends the line "RAFT {hello}\r\n".
func appendHello(dst []byte, h *hello) []byte {
	b, _ := json.Marshal(h) // a struct of strings and an int always marshals
	dst = append(dst, Op+" "...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

// parseHello decodes the first line of an accepted connection, "RAFT
// {hello}" with its line end.
func parseHello(line []byte) (*hello, error) {
	op, arg := splitLine(line)
	if !bytes.EqualFold(op, []byte(Op)) {
		return nil, fmt.Errorf("transport: first operation %q is not %s", op, Op)
	}
	h := new(hello)
	if err := json.Unmarshal(arg, h); err != nil {
		return nil, fmt.Errorf("transport: hello: %w", err)
	}
	return h, nil
}

// splitLine returns a control line's operation and its argument, without
// the line end and the spaces around the argument.
func splitLine(line []byte) (op, arg []byte) {
	line = bytes.TrimRight(line, "\r\n")
	i := bytes.IndexAny(line, " \t{")
	if i < 0 {
		return line, nil
	}
	return line[:i], bytes.TrimSpace(line[i:])
}

// readLine reads one line ending in LF from r, at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		b, err := r.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > max {
			return nil, fmt.Errorf("transport: line longer than %d bytes", max)
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// appendFrameHeader appends the length prefix of a frame of n bytes.
func appendFrameHeader(dst []byte, n int) []byte {
	return binary.LittleEndian.AppendUint32(dst, uint32(n))
}

// readFrame reads one length-prefixed frame of at most max bytes. It
// returns io.EOF when r ends between frames, io.ErrUnexpectedEOF when it
// ends inside one, and an error wrapping errBadLength for a length of 0 or
// above max. The frame is a new slice the caller may keep.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n == 0 || uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d (limit %d)", errBadLength, n, max)
	}
	buf := make([]byte, 0, min(int(n), readChunk))
	for len(buf) < int(n) {
		k := min(int(n)-len(buf), readChunk)
		buf = slices.Grow(buf, k)
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}
