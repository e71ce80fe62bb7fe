package jetstream

import (
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/stream"
)

// metaFile is the content of a stream's meta.json (metafile).
type metaFile struct {
	Config  stream.Config `json:"config"`
	Created time.Time     `json:"created"`
}

// consumerMeta is the content of a durable consumer's meta.json.
type consumerMeta struct {
	Config  consumer.Config `json:"config"`
	Created time.Time       `json:"created"`
}
