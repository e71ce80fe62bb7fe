package stream

import (
	"fmt"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/transform"
)

// checkTransform checks subject_transform as nats-server v2.15.2
// checkStreamCfgLocked does, after the subjects: a source that is not ""
// must be a valid subject (10155 "stream transform source: invalid subject
// <src>"), and the mapping must pass transform.Validate (10156 "stream
// transform: <error>"). An empty destination is accepted and maps nothing.
func (c *Config) checkTransform() *jserr.Error {
	tr := c.SubjectTransform
	if tr == nil {
		return nil
	}
	if tr.Source != "" && !subject.ValidSubject(tr.Source) {
		err := fmt.Errorf("%w %s", transform.ErrBadSubject, tr.Source)
		return jserr.New(jserr.StreamTransformInvalidSource, jserr.Sub("err", err))
	}
	if err := transform.Validate(tr.Source, tr.Destination); err != nil {
		return jserr.New(jserr.StreamTransformInvalidDestination, jserr.Sub("err", err))
	}
	return nil
}

// compileTransform returns the compiled subject_transform of cfg, or nil
// when it has none or it does not compile (Validate refuses such a
// config, so a stream never has one).
func compileTransform(cfg *Config) *transform.Transform {
	if cfg.SubjectTransform == nil {
		return nil
	}
	t, err := transform.New(cfg.SubjectTransform.Source, cfg.SubjectTransform.Destination)
	if err != nil {
		return nil
	}
	return t
}

// mapSubject returns the subject a message published to subj is stored
// under: subj mapped by the stream's subject_transform when its source
// matches subj, else subj itself. nats-server v2.15.2 does the same for
// every message a stream stores, published, sourced or mirrored
// (processJetStreamMsgWithBatch): a subject the transform's source does
// not match is stored unchanged, not refused.
func (s *Stream) mapSubject(subj string) string {
	if s.in == nil {
		return subj
	}
	mapped, _ := s.in.Map(subj)
	return mapped
}
