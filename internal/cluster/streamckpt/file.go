package streamckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"

	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/vfs"
)

// FileName is the name of a replica's checkpoint file in Config.Dir.
const FileName = "replica.ckpt"

const (
	fileVersion = 1
	headerSize  = 16
	// bodyFixed is the body before the stream's state: group, replica,
	// index, position.
	bodyFixed = 8 + 8 + 8 + filestore.PositionSize
	// maxBody bounds the body a reader accepts (the state holds the
	// duplicate window: 1 GiB is far past any real one).
	maxBody = 1 << 30
)

var (
	fileMagic = []byte("CAIRNRPL")
	crcTable  = crc32.MakeTable(crc32.Castagnoli)
)

// ErrDamaged is returned (wrapped) by Open for a checkpoint file that
// fails its checks (magic, version, length, CRC, a position or state that
// does not decode) or that belongs to another group or replica. The
// replica is fenced: it is replaced, never started from a guess
// (docs/cluster.md decision 12).
var ErrDamaged = errors.New("streamckpt: damaged checkpoint file")

// checkpoint is the content of a checkpoint file.
type checkpoint struct {
	group   raftnode.GroupID
	replica raftnode.ReplicaID
	index   uint64
	pos     filestore.Position
	state   []byte // stream.Stream.AppendCheckpoint's bytes
}

// encode returns the file's bytes (the package comment's format).
func (c *checkpoint) encode() []byte {
	n := bodyFixed + len(c.state)
	b := make([]byte, 0, headerSize+n+4)
	b = append(b, fileMagic...)
	b = binary.LittleEndian.AppendUint32(b, fileVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.group))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.replica))
	b = binary.LittleEndian.AppendUint64(b, c.index)
	b = filestore.AppendPosition(b, c.pos)
	b = append(b, c.state...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// decode checks and decodes a file's bytes; errors wrap ErrDamaged.
func decode(b []byte) (*checkpoint, error) {
	if len(b) < headerSize+bodyFixed+4 || string(b[:8]) != string(fileMagic) {
		return nil, fmt.Errorf("%w: %d bytes, not a checkpoint file", ErrDamaged, len(b))
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != fileVersion {
		return nil, fmt.Errorf("%w: version %d", ErrDamaged, v)
	}
	n := uint64(binary.LittleEndian.Uint32(b[12:]))
	if n < bodyFixed || n > maxBody || uint64(len(b)) != headerSize+n+4 {
		return nil, fmt.Errorf("%w: body of %d bytes in a file of %d", ErrDamaged, n, len(b))
	}
	if crc32.Checksum(b[:len(b)-4], crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: CRC mismatch", ErrDamaged)
	}
	body := b[headerSize : len(b)-4]
	c := &checkpoint{
		group:   raftnode.GroupID(binary.LittleEndian.Uint64(body)),
		replica: raftnode.ReplicaID(binary.LittleEndian.Uint64(body[8:])),
		index:   binary.LittleEndian.Uint64(body[16:]),
		state:   body[bodyFixed:],
	}
	pos, err := filestore.DecodePosition(body[24:bodyFixed])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	c.pos = pos
	return c, nil
}

// readFile reads the checkpoint file in dir: nil, nil when there is none.
func readFile(fs vfs.FS, dir string) (*checkpoint, error) {
	name := path.Join(dir, FileName)
	f, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > headerSize+maxBody+4 {
		return nil, fmt.Errorf("%w: %s holds %d bytes", ErrDamaged, name, size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	c, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// writeFile replaces the checkpoint file in dir with c: write
// FileName.new, fsync, rename, fsync the directory.
func writeFile(fs vfs.FS, dir string, c *checkpoint) error {
	return vfs.ReplaceFile(fs, dir, FileName, c.encode())
}
