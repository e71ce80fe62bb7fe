package consumerrun

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// Consumer reset (ADR-60; nats-server v2.15.2 processResetReq and
// resetStartingSeqLocked). Every consumer answers
// $JS.API.CONSUMER.RESET.<stream>.<consumer> itself, so a reset of a
// missing consumer gets no responders, as in nats-server. An empty body
// resets the delivery state to just above the ack floor; {"seq":N}
// restarts it at N, which a consumer with deliver_policy all always
// allows, by_start_sequence from its opt_start_seq on, by_start_time from
// the first message at its opt_start_time on, and no other policy. The
// loop checks the request (the proposer's part) and commits a
// consumer.Reset operation. The answer is the consumer's info with
// reset_seq, type consumer_reset_response; it is sent once the reset
// state is stored (persisted consumers), and it is not counted in the
// API statistics.

// resetEvent is a reset request queued to the consumer's loop.
type resetEvent struct {
	reply string
	body  []byte
	// ident is set when the request carried a Nats-Stream-Identity
	// header: a successful answer then carries the stream's identity in
	// one (nats-server v2.15.2 processResetReq; a durable source compares
	// it with the origin it copied from, docs/durable-sourcing.md).
	ident bool
}

// consumerResetRequest is the body of a reset.
type consumerResetRequest struct {
	Seq uint64 `json:"seq,omitempty"`
}

// consumerResetResponse is nats-server's JSApiConsumerResetResponse.
type consumerResetResponse struct {
	Type  string       `json:"type"`
	Error *jserr.Error `json:"error,omitempty"`
	*consumer.Info
	ResetSeq uint64 `json:"reset_seq"`
}

const resetResponseType = "io.nats.jetstream.api.v1.consumer_reset_response"

func (c *Consumer) onReset(subject, reply string, hdr, data []byte) {
	if reply == "" {
		return
	}
	if stream.RequiredLevelAbove(hdr, c.env.APILevel) {
		c.sendReset(reply, &consumerResetResponse{Error: jserr.New(jserr.RequiredApiLevel)})
		return
	}
	_, ident := stream.HeaderValue(hdr, stream.HdrStreamIdentity)
	c.push(cevent{reset: &resetEvent{reply: reply, body: append([]byte(nil), data...), ident: ident}, fwd: c.raw(subject, reply, hdr, data)})
}

// sendReset answers a reset.
func (c *Consumer) sendReset(reply string, resp *consumerResetResponse) {
	c.env.Transport.Publish(reply, "", nil, resetPayload(resp))
}

func resetPayload(resp *consumerResetResponse) []byte {
	resp.Type = resetResponseType
	b, err := json.Marshal(resp)
	if err != nil { // the info always encodes
		return nil
	}
	return b
}

// reset serves a reset request on the consumer's loop, with c.mu held:
// it checks the request, commits a Reset operation, and answers once the
// reset state is stored (at once for a consumer that keeps no files).
func (c *Consumer) reset(ev *resetEvent, now time.Time) {
	var req consumerResetRequest
	if len(ev.body) > 0 {
		if err := json.Unmarshal(ev.body, &req); err != nil {
			c.sendReset(ev.reply, &consumerResetResponse{Error: jserr.New(jserr.InvalidJSON, jserr.Sub("err", err))})
			return
		}
	}
	seq, err := c.resetSeq(req.Seq)
	if err != nil {
		c.sendReset(ev.reply, &consumerResetResponse{Error: jserr.New(jserr.ConsumerInvalidReset, jserr.Sub("err", err))})
		return
	}
	c.Commit(&consumer.Reset{Stream: seq})
	c.d.Reset()
	c.lastAck = time.Time{}
	c.dirty = true
	c.resetRetention = true
	resp := resetPayload(&consumerResetResponse{Info: c.infoLocked(), ResetSeq: seq})
	var hdr []byte
	if ev.ident {
		hdr = stream.SetHeader(nil, stream.HdrStreamIdentity, stream.Identity(c.sr.Created()))
	}
	if c.saver == nil {
		c.env.Transport.Publish(ev.reply, "", hdr, resp)
		return
	}
	c.snapWait = append(c.snapWait, confirm{reply: ev.reply, hdr: hdr, payload: resp})
}

// resetSeq checks a reset to seq against the deliver policy and returns
// the sequence to restart at (seq 0: just above the ack floor).
func (c *Consumer) resetSeq(seq uint64) (uint64, error) {
	if seq == 0 {
		return c.st.AckFloor().Stream + 1, nil
	}
	switch c.cfg.DeliverPolicy {
	case consumer.DeliverAll:
	case consumer.DeliverByStartSequence:
		if seq < c.cfg.OptStartSeq {
			return 0, errors.New("below start seq")
		}
	case consumer.DeliverByStartTime:
		if seq < streamrun.SeqFromTime(c.sr.Store(), c.cfg.OptStartTime.UnixNano()) {
			return 0, errors.New("below start time")
		}
	default:
		return 0, errors.New("not allowed")
	}
	return seq, nil
}
