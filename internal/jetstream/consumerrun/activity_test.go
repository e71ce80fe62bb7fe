package consumerrun

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
)

// A follower of a replicated consumer takes the times of its leader's
// deliveries from the applied operations and notes the acks it applies,
// so that the info's delivered.last_active and ack_floor.last_active
// hold after a change of leader, on the replica that leads next and on
// the deposed one (a trial: both vanished after a step-down, where
// nats-server v2.15.2 keeps them; dashboards alerting on a consumer's
// inactivity saw "never").
func TestFollowerKeepsLastActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &heldLog{}
		c, _ := startPullConsumer(t, 5, func(a streamrun.Applier[consumer.Op]) streamrun.Log[consumer.Op] {
			l.a = a
			return l
		})
		c.SetLeading(false)
		synctest.Wait()
		delivered := time.Now().Add(-3 * time.Second).Truncate(time.Microsecond)
		c.ApplyBatch(1, []consumer.Op{&consumer.Reset{Stream: 1}, &consumer.Deliver{Stream: 1, Time: delivered.UnixNano()}}, 0)
		time.Sleep(time.Second)
		c.ApplyBatch(2, []consumer.Op{&consumer.Ack{Stream: 1, Consumer: 1}}, 0)
		acked := time.Now()
		check := func(when string) {
			t.Helper()
			info := c.Info()
			if info.Delivered.Last == nil || !info.Delivered.Last.Equal(delivered) {
				t.Fatalf("%s: delivered.last_active %v, want the leader's delivery time %v", when, info.Delivered.Last, delivered)
			}
			if info.AckFloor.Last == nil || !info.AckFloor.Last.Equal(acked) {
				t.Fatalf("%s: ack_floor.last_active %v, want %v (when the ack applied)", when, info.AckFloor.Last, acked)
			}
		}
		check("following")
		c.SetLeading(true)
		synctest.Wait()
		check("leading next")
		c.SetLeading(false)
		synctest.Wait()
		check("deposed")
	})
}
