package stream

import (
	"fmt"
	"time"
)

// Subject delete markers (nats-server v2.15.2 StreamConfig; the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg; nats-server
// v2.15.2 server/memstore.go and filestore.go expireMsgs and
// handleRemovalOrSdm). When subject_delete_marker_ttl is set and max_age
// or a message's Nats-TTL removes the last message of a subject, the
// stream stores a marker on that subject instead of just removing it: an
// empty message whose header is
//
//	NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: <ttl>\r\nNats-Rollup: sub\r\n\r\n
//
// with <ttl> the marker TTL in whole seconds written as a Go duration
// ("1m0s"). The marker goes through Apply as a publish does, and its
// Nats-Rollup removes the expired message; it expires in turn after its
// own TTL, leaving no new marker.

// markerReasonMaxAge is the Nats-Marker-Reason of a marker left by expiry
// (nats-server JSMarkerReasonMaxAge). nats-server v2.15.2 defines
// "Purge" and "Remove" too, but no server path writes them.
const markerReasonMaxAge = "MaxAge"

// ExpireUpTo removes what has expired at now (unix nanoseconds): max_age,
// per-message TTLs (store.Store.ExpireUpTo). It returns the markers to
// store, one Entry per subject whose last message expired, stamped now,
// for the caller to Apply in order; and the next TTL deadline (unix
// nanoseconds, 0 when none; it may be at or before now while a marker
// waits to be applied). A marker that fails (the stream is sealed or
// full) leaves its message in place, and the next call returns it
// again. MaxAgeDeadline reports the max_age deadline the call found.
func (s *Stream) ExpireUpTo(now int64) (markers []Entry, next int64, err error) {
	x, err := s.store.ExpireUpTo(now)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: expire: %w", s.cfg.Name, err)
	}
	s.nextAge = x.NextAge
	if len(x.Markers) > 0 {
		hdr := markerHeader(s.cfg.SubjectDeleteMarkerTTL)
		for _, m := range x.Markers {
			markers = append(markers, Entry{Subject: m.Subject, Header: hdr, Time: now})
		}
	}
	return markers, x.Next, nil
}

// MaxAgeDeadline returns when the first stored message that max_age
// removes (one with a TTL of never passed over) passes max_age, as the
// last ExpireUpTo found it (unix nanoseconds), and false when it found
// none. A message stored since is not counted: with a max_age of a second
// or more, the next regular pass finds it in time.
func (s *Stream) MaxAgeDeadline() (int64, bool) {
	return s.nextAge, s.nextAge != 0
}

// markerHeader returns the header of a subject delete marker whose TTL is
// ttl, truncated to whole seconds.
func markerHeader(ttl time.Duration) []byte {
	secs := time.Duration(int64(ttl.Seconds())) * time.Second
	return fmt.Appendf(nil, "%s%s%s: %s%s%s: %s%s%s: %s%s%s",
		hdrVersion, crlf,
		hdrMarkerReason, markerReasonMaxAge, crlf,
		hdrTTL, secs, crlf,
		hdrRollup, rollupSub, crlf, crlf)
}
