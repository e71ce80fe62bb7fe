package jetstream

import (
	"time"

	"github.com/cairnmq/cairn/internal/stream"
)

// metaFile is the content of a stream's meta.json (metafile).
type metaFile struct {
	Config  stream.Config `json:"config"`
	Created time.Time     `json:"created"`
}
