package jetstream

import (
	"time"

	"github.com/nats-io/nuid"
)

// pushed accounts a push delivery against the flow control window and
// asks for a confirmation once half of the window is outstanding
// (protocol.md section 5.7).
func (c *cons) pushed(size int) {
	if !c.cfg.FlowControl {
		return
	}
	c.fc.outstanding += size
	if c.fc.reply == "" && c.fc.outstanding >= c.fc.window/2 {
		c.fc.reply = "$JS.FC." + c.sr.name + "." + c.name + "." + nuid.Next()[18:]
		c.fc.atRequest = c.fc.outstanding
		c.js.tr.Publish(c.cfg.DeliverSubject, c.fc.reply, hdrFlowControlReq, nil)
	}
}

// flowControlReply takes the client's confirmation of the latest flow
// control request: what was outstanding then is confirmed and the window
// doubles.
func (c *cons) flowControlReply(subj string) {
	if subj != c.fc.reply {
		return
	}
	c.fc.outstanding = max(c.fc.outstanding-c.fc.atRequest, 0)
	c.fc.reply = ""
	c.fc.window = min(c.fc.window*2, fcWindowMax)
}

// heartbeats sends a push consumer's idle heartbeat after idle_heartbeat
// without a delivery, naming the outstanding flow control request as
// Nats-Consumer-Stalled.
func (c *cons) heartbeats(now time.Time) {
	if !c.cfg.IsPush() || c.cfg.Heartbeat <= 0 || now.Sub(c.lastHB) < c.cfg.Heartbeat {
		return
	}
	c.lastHB = now
	d := c.st.Delivered()
	c.js.tr.Publish(c.cfg.DeliverSubject, "", heartbeatHeader(d.Consumer, d.Stream, c.fc.reply), nil)
}
