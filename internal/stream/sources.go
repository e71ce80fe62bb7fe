package stream

import (
	"fmt"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/transform"
)

// checkMirror makes nats-server v2.15.2's mirror checks
// (checkStreamCfgLocked, nats-server v2.15.2 StreamSource; ADR-59; nats-server v2.15.2 validation, checkStreamCfg and checkConsumerCfg), in its
// order: 10143, 10034, 10031, 10173, 10198, 10209, 10186, 10213 (a
// durable mirror consumer), 10150, 10052 for delete markers, then each
// subject transform (10151, 10154, 10152) and the origin's name (10142).
func (c *Config) checkMirror() *jserr.Error {
	m := c.Mirror
	if m == nil {
		return nil
	}
	for _, f := range []struct {
		on   bool
		code jserr.ErrCode
	}{
		{c.FirstSeq > 0, jserr.MirrorWithFirstSeq},
		{len(c.Subjects) > 0, jserr.MirrorWithSubjects},
		{len(c.Sources) > 0, jserr.MirrorWithSources},
		{c.AllowMsgCounter, jserr.MirrorWithCounters},
		{c.AllowAtomicPublish, jserr.MirrorWithAtomicPublish},
		{c.AllowBatchPublish, jserr.MirrorWithBatchPublish},
		{c.AllowMsgSchedules, jserr.MirrorWithMsgSchedules},
		{m.Consumer != nil && !validSourceConsumer(m), jserr.MirrorDurableConsumerCfgInvalid},
		{m.FilterSubject != "" && len(m.SubjectTransforms) > 0, jserr.MirrorMultipleFiltersNotAllowed},
	} {
		if f.on {
			return jserr.New(f.code)
		}
	}
	if c.SubjectDeleteMarkerTTL > 0 {
		return invalid("subject delete markers forbidden on mirrors")
	}
	if err := checkTransforms(m.SubjectTransforms, mirrorCodes, subject.Overlap); err != nil {
		return err
	}
	if m.External == nil && !ValidName(m.Name) {
		return jserr.New(jserr.MirrorInvalidStreamName)
	}
	return nil
}

// checkSources makes nats-server v2.15.2's source checks, in its order:
// 10187 with message schedules, then for each source 10141 (name), 10140
// (a second source with the same name, filter and transforms), 10144,
// each transform (10145, 10146), overlapping transform sources (10147),
// 10215 for an invalid durable source consumer and 10216 for a second
// source of the same origin through the same consumer
// (StreamSource.composeCName).
func (c *Config) checkSources() *jserr.Error {
	if len(c.Sources) > 0 && c.AllowMsgSchedules {
		return jserr.New(jserr.SourceWithMsgSchedules)
	}
	seen, consumers := map[string]bool{}, map[string]bool{}
	for _, src := range c.Sources {
		if src == nil || !ValidName(src.Name) {
			return jserr.New(jserr.SourceInvalidStreamName)
		}
		iname := src.IndexName()
		if seen[iname] {
			return jserr.New(jserr.SourceDuplicateDetected)
		}
		seen[iname] = true
		if src.FilterSubject != "" && len(src.SubjectTransforms) > 0 {
			return jserr.New(jserr.SourceMultipleFiltersNotAllowed)
		}
		if err := checkTransforms(src.SubjectTransforms, sourceCodes, subject.SubsetOf); err != nil {
			return err
		}
		if src.Consumer != nil {
			if !validSourceConsumer(src) {
				return jserr.New(jserr.SourceDurableConsumerCfgInvalid)
			}
			cname := src.Name + " " + src.Consumer.Name
			if consumers[cname] {
				return jserr.New(jserr.SourceDurableConsumerDuplicateDetected)
			}
			consumers[cname] = true
		}
	}
	return nil
}

// transformCodes are the errors of a mirror's or a source's transforms.
type transformCodes struct{ filter, dest, overlap jserr.ErrCode }

var (
	mirrorCodes = transformCodes{jserr.MirrorInvalidSubjectFilter, jserr.MirrorInvalidTransformDestination, jserr.MirrorOverlappingSubjectFilters}
	sourceCodes = transformCodes{jserr.SourceInvalidSubjectFilter, jserr.SourceInvalidTransformDestination, jserr.SourceOverlappingSubjectFilters}
)

// checkTransforms checks each transform's source subject and mapping,
// then that no two sources collide (overlap: a mirror's rule, subset
// either way: a source's).
func checkTransforms(trs []SubjectTransform, codes transformCodes, collide func(a, b string) bool) *jserr.Error {
	for _, tr := range trs {
		if tr.Source != "" && !subject.ValidSubject(tr.Source) {
			return jserr.New(codes.filter, jserr.Sub("err", fmt.Errorf("invalid subject %s", tr.Source)))
		}
		if err := transform.Validate(tr.Source, tr.Destination); err != nil {
			return jserr.New(codes.dest, jserr.Sub("err", err))
		}
	}
	for i, a := range trs {
		for j, b := range trs {
			if i != j && (collide(a.Source, b.Source) || collide(b.Source, a.Source)) {
				return jserr.New(codes.overlap)
			}
		}
	}
	return nil
}

// validSourceConsumer checks a durable source consumer (nats-server
// 2.14+): a valid name, a literal deliver subject, no start position and
// no single filter.
func validSourceConsumer(s *Source) bool {
	c := s.Consumer
	return ValidName(c.Name) && subject.ValidSubject(c.DeliverSubject) &&
		!strings.ContainsAny(c.DeliverSubject, "*>") &&
		s.OptStartSeq == 0 && s.OptStartTime == nil && s.FilterSubject == ""
}

// IndexName is the source's identity among a stream's sources and in the
// Nats-Stream-Source header: "<name> <filters> <destinations>", the
// filters and destinations joined by form feeds, an empty one meaning
// ">"; a durable source's name is followed by ":C=" and the hash (Hash8)
// of its consumer's name (nats-server v2.15.2 StreamSource.composeIName;
// cairn has no external suffix, refusing external sources).
func (s *Source) IndexName() string {
	src, dst := s.FilterSubject, ">"
	if src == "" {
		src = ">"
	}
	if len(s.SubjectTransforms) > 0 {
		srcs := make([]string, len(s.SubjectTransforms))
		dsts := make([]string, len(s.SubjectTransforms))
		for i, tr := range s.SubjectTransforms {
			srcs[i], dsts[i] = orAll(tr.Source), orAll(tr.Destination)
		}
		src, dst = strings.Join(srcs, "\f"), strings.Join(dsts, "\f")
	}
	name := s.Name
	if s.External != nil {
		name += ":" + Hash8(s.External.APIPrefix)
	}
	if s.Consumer != nil {
		name += ":C=" + Hash8(s.Consumer.Name)
	}
	return name + " " + src + " " + dst
}

func orAll(s string) string {
	if s == "" {
		return ">"
	}
	return s
}

// Origins looks up another stream's config by name for the checks that
// need it; ok is false when there is no such stream.
type Origins func(name string) (cfg Config, ok bool)

// CheckOrigins makes the checks of a mirror or sourced stream that need
// the other streams of the account, after Validate (nats-server v2.15.2
// checkStreamCfgLocked): a mirror's or source's max_msg_size below its
// origin's (10030, 10046), and a cycle of sources and mirrors (10052
// "detected cycle"). It also sets mirror_direct from the origin's
// allow_direct, as nats-server does, unless pedantic (then 10157 when they
// differ).
func (c *Config) CheckOrigins(get Origins, pedantic bool) *jserr.Error {
	if m := c.Mirror; m != nil && m.External == nil {
		if o, ok := get(m.Name); ok {
			if c.MaxMsgSize > 0 && o.MaxMsgSize > 0 && c.MaxMsgSize < o.MaxMsgSize {
				return jserr.New(jserr.MirrorMaxMessageSizeTooBig)
			}
			if pedantic && c.MirrorDirect != o.AllowDirect {
				return pedanticError("origin stream has direct get set, mirror has it disabled")
			}
			c.MirrorDirect = o.AllowDirect
		}
	}
	for _, src := range c.Sources {
		if o, ok := get(src.Name); ok && src.External == nil {
			if c.MaxMsgSize > 0 && o.MaxMsgSize > 0 && c.MaxMsgSize < o.MaxMsgSize {
				return jserr.New(jserr.SourceMaxMessageSizeTooBig)
			}
		}
	}
	if err := c.checkExternalPrefixes(get); err != nil {
		return err
	}
	if hasCycle(c, get) {
		return invalid("detected cycle")
	}
	return nil
}

// checkExternalPrefixes checks the external mirror's or sources' prefixes
// (nats-server v2.15.2 checkStreamCfg): each deliver prefix must be a
// literal subject (10024) that no origin's subject S on this account
// collides with as "<prefix>.S" (10022); each api prefix must be a
// literal subject (10052) not colliding with $JS.API (10021).
func (c *Config) checkExternalPrefixes(get Origins) *jserr.Error {
	var subs, deliver, api []string
	all := c.Sources
	if c.Mirror != nil {
		all = append([]*Source{c.Mirror}, all...)
	}
	for _, src := range all {
		switch {
		case src.External == nil:
			if o, ok := get(src.Name); ok {
				subs = append(subs, o.Subjects...)
			}
		default:
			if p := src.External.DeliverPrefix; p != "" {
				deliver = append(deliver, p)
			}
			if p := src.External.APIPrefix; p != "" {
				api = append(api, p)
			}
		}
	}
	for _, p := range deliver {
		if !subject.ValidLiteral(p) {
			return jserr.New(jserr.StreamInvalidExternalDeliverySubj, jserr.Sub("prefix", p))
		}
		for _, sub := range subs {
			if subject.Overlap(sub, p+"."+sub) {
				return jserr.New(jserr.StreamExternalDelPrefixOverlaps, jserr.Sub("prefix", p), jserr.Sub("subject", sub))
			}
		}
	}
	for _, p := range api {
		if !subject.ValidLiteral(p) {
			return invalid(fmt.Sprintf("stream external api prefix %q must be a valid subject without wildcards", p))
		}
		if subject.Overlap(p, "$JS.API") {
			return jserr.New(jserr.StreamExternalApiOverlap, jserr.Sub("prefix", p), jserr.Sub("subject", "$JS.API"))
		}
	}
	return nil
}

// hasCycle walks the sources and mirrors from c (nats-server's cycle
// check): reaching a visited stream again through a source whose filter
// overlaps the visiting stream's subjects, or through a mirror, is a
// cycle.
func hasCycle(c *Config, get Origins) bool {
	toVisit := []Config{*c}
	visited := map[string]bool{}
	for len(toVisit) > 0 {
		cur := toVisit[0]
		toVisit = toVisit[1:]
		visited[cur.Name] = true
		for _, src := range cur.Sources {
			if src.External != nil {
				continue
			}
			if visited[src.Name] {
				if overlapsAny(cur.Subjects, src.FilterSubject) {
					return true
				}
			} else if o, ok := get(src.Name); ok {
				toVisit = append(toVisit, o)
			}
		}
		if m := cur.Mirror; m != nil && m.External == nil {
			if visited[m.Name] {
				return true
			}
			if o, ok := get(m.Name); ok {
				toVisit = append(toVisit, o)
			}
		}
	}
	return false
}

func overlapsAny(subjects []string, filter string) bool {
	if filter == "" {
		return true
	}
	for _, s := range subjects {
		if subject.Overlap(s, filter) {
			return true
		}
	}
	return false
}

// CheckSourceFilters checks the filter_subject of the mirror and of each
// source on create, as nats-server v2.15.2's addStream does after the
// account limits and before the subject overlap: an invalid one is 10049
// "subject filter '<f>' for the mirror invalid subject" (sic, no colon) or
// "subject filter '<f>' for the source: invalid subject". (A transform's
// source is checked by Validate. nats-server does not check the filters
// on update; cairn's update does, and answers 10069 with the same text.)
func (c *Config) CheckSourceFilters() *jserr.Error {
	if m := c.Mirror; m != nil && len(m.SubjectTransforms) == 0 && m.FilterSubject != "" && !subject.ValidSubject(m.FilterSubject) {
		return jserr.New(jserr.StreamCreate, jserr.Sub("err", fmt.Sprintf("subject filter '%s' for the mirror invalid subject", m.FilterSubject)))
	}
	for _, src := range c.Sources {
		if len(src.SubjectTransforms) == 0 && src.FilterSubject != "" && !subject.ValidSubject(src.FilterSubject) {
			return jserr.New(jserr.StreamCreate, jserr.Sub("err", fmt.Sprintf("subject filter '%s' for the source: invalid subject", src.FilterSubject)))
		}
	}
	return nil
}
