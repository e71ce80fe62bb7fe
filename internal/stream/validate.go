package stream

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/subject"
	"github.com/cairnmq/cairn/internal/transform"
)

// Limits of the stream configuration (nats-server JSMaxNameLen,
// JSMaxDescriptionLen, JSMaxMetadataLen, StreamMaxReplicas).
const (
	MaxNameLen        = 255        // bytes of a stream name
	MaxDescriptionLen = 4 * 1024   // bytes of a description
	MaxMetadataLen    = 128 * 1024 // bytes of all metadata keys and values
	MaxReplicas       = 5          // num_replicas of a clustered stream
)

// minWindow is the smallest non-zero max_age and duplicate_window.
const minWindow = 100 * time.Millisecond

// invalid returns error 10052 with text (nats-server
// NewJSStreamInvalidConfigError).
func invalid(text string) *jserr.Error {
	return jserr.New(jserr.StreamInvalidConfig, jserr.Sub("err", text))
}

// CheckCreate runs the checks nats-server makes on a create request before
// it validates the config (jetstream_api.go jsStreamCreateRequest), after
// the API layer checked that the name equals the subject token (10056):
// 10128 for a name with '/' or '\', 10052 for sealed:true, 10052 for
// mirror_direct without mirror.
func (c *Config) CheckCreate() *jserr.Error {
	switch {
	case strings.ContainsAny(c.Name, `\/`):
		return jserr.New(jserr.StreamNameContainsPathSeparators)
	case c.Sealed:
		return invalid("stream configuration for create can not be sealed")
	case c.MirrorDirect && c.Mirror == nil:
		return invalid("stream has no mirror but does have mirror direct")
	}
	return nil
}

// Validate checks a config that went through SetDefaults, with the rules
// and in the order of nats-server v2.15.2 checkStreamCfgLocked followed by
// its single-server replicas check (nats-server v2.15.2 validation, checkStreamCfg and checkConsumerCfg). Every error
// is 10052 with nats-server's text unless noted: 10133 for negative
// replicas, 10143/10034/10031 for a mirror with first_seq, subjects or
// sources, 10155 and 10156 for a subject_transform whose source or
// mapping is invalid (checkTransform), 10074 for num_replicas > 1.
// Last, it refuses with 10052 a bad dead-letter subject in the metadata
// (CheckDeadLetter, a check of cairn's own). Checks that need other
// streams or the account (subject overlap 10065, max_bytes required
// 10113, source cycles) belong to the caller.
func (c *Config) Validate() *jserr.Error { return c.validate(configChecks) }

// ValidateClustered is Validate for a clustered JetStream, where a
// stream may have up to MaxReplicas replicas: every check but the single
// server's refusal of replicas (10074).
func (c *Config) ValidateClustered() *jserr.Error { return c.validate(clusteredChecks) }

func (c *Config) validate(checks []func(*Config) *jserr.Error) *jserr.Error {
	for _, check := range checks {
		if err := check(c); err != nil {
			return err
		}
	}
	return nil
}

// configChecks are Validate's checks in nats-server's order;
// clusteredChecks the same without checkSingleServer.
var (
	configChecks    = slices.Concat(checksBefore, []func(*Config) *jserr.Error{(*Config).checkSingleServer}, checksAfter)
	clusteredChecks = slices.Concat(checksBefore, checksAfter)
)

var checksBefore = []func(*Config) *jserr.Error{
	(*Config).checkName,
	(*Config).checkSizes,
	(*Config).checkEnums,
	(*Config).checkReplicas,
	(*Config).checkWindows,
	(*Config).checkFlags,
	(*Config).checkMirror,
	(*Config).checkSources,
	(*Config).checkSubjects,
	(*Config).checkTransform,
	(*Config).checkRePublish,
	(*Config).checkPlacement,
}

var checksAfter = []func(*Config) *jserr.Error{
	(*Config).checkDeadLetter,
}

// ValidName reports whether name may name a stream: non-empty, no
// whitespace and none of . * > \ / (nats-server isValidAssetName). The
// length limit is separate (MaxNameLen).
func ValidName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n\f.*>\\/")
}

func (c *Config) checkName() *jserr.Error {
	if !ValidName(c.Name) {
		return invalid(`stream name is required and can not contain '.', '*', '>', '\', '/'`)
	}
	if len(c.Name) > MaxNameLen {
		return invalid(fmt.Sprintf("stream name is too long, maximum allowed is %d", MaxNameLen))
	}
	return nil
}

func (c *Config) checkSizes() *jserr.Error {
	if len(c.Description) > MaxDescriptionLen {
		return invalid(fmt.Sprintf("stream description is too long, maximum allowed is %d", MaxDescriptionLen))
	}
	n := 0
	for k, v := range c.Metadata {
		n += len(k) + len(v)
	}
	if n > MaxMetadataLen {
		return invalid(fmt.Sprintf("stream metadata exceeds maximum size of %d bytes", MaxMetadataLen))
	}
	return nil
}

// checkEnums catches enumeration values set in Go outside their range
// (JSON decoding cannot produce them).
func (c *Config) checkEnums() *jserr.Error {
	switch {
	case c.Retention < 0 || int(c.Retention) >= len(retentionNames):
		return invalid("invalid retention")
	case c.Discard < 0 || int(c.Discard) >= len(discardNames):
		return invalid("invalid discard policy")
	case c.Compression < 0 || int(c.Compression) >= len(compressionNames):
		return invalid("invalid compression")
	case c.Storage < 0 || int(c.Storage) >= len(storageNames):
		return invalid("invalid storage type")
	}
	return nil
}

func (c *Config) checkReplicas() *jserr.Error {
	if c.Replicas > MaxReplicas {
		return invalid(fmt.Sprintf("maximum replicas is %d", MaxReplicas))
	}
	if c.Replicas < 0 {
		return jserr.New(jserr.ReplicasCountCannotBeNegative)
	}
	return nil
}

// checkWindows checks max_age and duplicate_window.
func (c *Config) checkWindows() *jserr.Error {
	switch {
	case c.MaxAge < 0:
		return invalid("max age can not be negative")
	case c.MaxAge != 0 && c.MaxAge < minWindow:
		return invalid("max age needs to be >= 100ms")
	case c.DuplicateWindow < 0:
		return invalid("duplicates window can not be negative")
	case c.MaxAge != 0 && c.DuplicateWindow > c.MaxAge:
		return invalid("duplicates window can not be larger then max age")
	case c.DuplicateWindow > 0 && c.DuplicateWindow < minWindow:
		return invalid("duplicates window needs to be >= 100ms")
	}
	return nil
}

// checkFlags checks the combinations of flags and limits, in
// nats-server v2.15.2's order: roll-ups and purges, a counter stream's
// (ADR-49: no discard new, no message TTLs, no schedules, limits
// retention only; subject delete markers, which turn TTLs on later, are
// not refused), discard new per subject, subject delete markers,
// schedules, the persist mode.
func (c *Config) checkFlags() *jserr.Error {
	switch {
	case c.DenyPurge && c.AllowRollup:
		return invalid("roll-ups require the purge permission")
	case c.AllowMsgCounter && c.Discard == DiscardNew:
		return invalid("counter stream cannot use discard new")
	case c.AllowMsgCounter && c.AllowMsgTTL:
		return invalid("counter stream cannot use message TTLs")
	case c.AllowMsgCounter && c.AllowMsgSchedules:
		return invalid("counter stream cannot use message schedules")
	case c.AllowMsgCounter && c.Retention != LimitsPolicy:
		return invalid("counter stream can only use limits retention")
	case c.DiscardNewPerSubject && c.Discard != DiscardNew:
		return invalid("discard new per subject requires discard new policy to be set")
	case c.DiscardNewPerSubject && c.MaxMsgsPerSubject <= 0:
		return invalid("discard new per subject requires max msgs per subject > 0")
	case c.SubjectDeleteMarkerTTL > 0 && c.SubjectDeleteMarkerTTL < time.Second:
		return invalid("subject delete marker TTL must be at least 1 second")
	case c.SubjectDeleteMarkerTTL < 0:
		return invalid("subject delete marker TTL must not be negative")
	}
	c.forceMarkerFlags()
	if err := c.forceScheduleFlags(); err != nil {
		return err
	}
	return c.checkPersistMode()
}

// checkPersistMode refuses persist_mode async (ADR-56) where nats-server
// v2.15.2 checkStreamCfg does, right after the schedule flags: on a memory
// stream, on a replicated one (before the single-server replicas check,
// 10074) and with atomic batch publishing; each 10052. Fast batches,
// counters, schedules, mirrors and sources are allowed with it.
func (c *Config) checkPersistMode() *jserr.Error {
	if c.PersistMode != AsyncPersist {
		return nil
	}
	switch {
	case c.Storage != FileStorage:
		return invalid("async persist mode is only supported on file storage")
	case c.Replicas > 1:
		return invalid("async persist mode is not supported on replicated streams")
	case c.AllowAtomicPublish:
		return invalid("async persist mode is not supported with atomic batch publish")
	}
	return nil
}

// forceScheduleFlags refuses discard new on a stream with message
// schedules and turns on roll-ups with the purge permission, which
// schedules need (a schedule replaces the last on its subject), as
// nats-server v2.15.2 checkStreamCfg does outside pedantic mode (after
// the subject delete marker checks).
func (c *Config) forceScheduleFlags() *jserr.Error {
	if !c.AllowMsgSchedules {
		return nil
	}
	if c.Discard == DiscardNew {
		return invalid("message scheduling cannot use discard new")
	}
	if !c.AllowRollup {
		c.AllowRollup, c.DenyPurge = true, false
	}
	return nil
}

// forceMarkerFlags turns on what subject delete markers need, as
// nats-server v2.15.2 checkStreamCfg does outside pedantic mode (after it
// checked deny_purge against allow_rollup_hdrs): allow_msg_ttl, and
// roll-ups with the purge permission.
func (c *Config) forceMarkerFlags() {
	if c.SubjectDeleteMarkerTTL <= 0 {
		return
	}
	c.AllowMsgTTL = true
	if !c.AllowRollup {
		c.AllowRollup, c.DenyPurge = true, false
	}
}

// The subject spaces a stream may capture only with no_ack, and the
// exceptions.
var (
	apiSpaces  = []string{"$JS.>", "$JSC.>", "$NRG.>"}
	apiAllowed = "$JS.EVENT.>"
	sysSpace   = "$SYS.>"
	sysAllowed = "$SYS.ACCOUNT.>"
)

// checkSubjects checks each subject in turn: valid, ">" only with no_ack
// and R1, the API spaces only with no_ack, and no overlap with a later
// subject of the same stream. (nats-server also has a "duplicate subjects
// detected" check, which the overlap check always pre-empts.)
//
// The overlap check goes through subject.FirstOverlap (a token tree, not
// every pair), so a stream of 60,000 subjects is checked in a fraction of
// a second; the error names the same pair as the pairwise check, after
// the first invalid subject before it.
func (c *Config) checkSubjects() *jserr.Error {
	i, j, overlap := subject.FirstOverlap(c.Subjects)
	for k, subj := range c.Subjects {
		if err := c.checkSubject(subj); err != nil {
			return err
		}
		if overlap && k == i {
			return invalid(fmt.Sprintf("subject %q overlaps with %q", subj, c.Subjects[j]))
		}
	}
	if len(c.Subjects) == 0 && len(c.Sources) == 0 && c.Mirror == nil {
		return invalid("stream needs at least one configured subject or be a source/mirror")
	}
	return nil
}

func (c *Config) checkSubject(subj string) *jserr.Error {
	switch {
	case !subject.ValidSubject(subj):
		return invalid("invalid subject")
	case subj == ">" && !c.NoAck:
		return invalid("capturing all subjects requires no-ack to be true")
	case subj == ">" && c.Replicas != 1:
		return invalid("capturing all subjects requires replicas of 1")
	case c.NoAck:
		return nil
	}
	for _, space := range apiSpaces {
		if subject.Overlap(subj, space) && !subject.SubsetOf(subj, apiAllowed) {
			return invalid("subjects that overlap with jetstream api require no-ack to be true")
		}
	}
	if subject.Overlap(subj, sysSpace) && !subject.SubsetOf(subj, sysAllowed) {
		return invalid("subjects that overlap with system api require no-ack to be true")
	}
	return nil
}

// checkRePublish refuses a republish destination that overlaps the
// stream's own subjects (a cycle), then a source and destination that do
// not make a transform (nats-server v2.15.2 checkStreamCfgLocked).
func (c *Config) checkRePublish() *jserr.Error {
	rp := c.RePublish
	if rp == nil {
		return nil
	}
	for _, subj := range c.Subjects {
		if subject.Overlap(rp.Destination, subj) {
			return invalid("stream configuration for republish destination forms a cycle")
		}
	}
	if _, err := transform.New(rp.Source, rp.Destination); err != nil {
		return invalid(fmt.Sprintf("stream configuration for republish with transform from '%s' to '%s' not valid", rp.Source, rp.Destination))
	}
	return nil
}

func (c *Config) checkPlacement() *jserr.Error {
	if c.Placement != nil && c.Placement.Preferred != "" {
		return invalid("preferred server not permitted in placement")
	}
	return nil
}

// checkSingleServer refuses replicas on a server without clustering.
func (c *Config) checkSingleServer() *jserr.Error {
	if c.Replicas > 1 {
		return jserr.New(jserr.StreamReplicasNotSupported)
	}
	return nil
}
