package test

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// TestDifferentialDomain compares the JetStream API of both servers with
// jetstream { domain: HUB }: requests under $JS.HUB.API and $JS.API,
// PubAcks, infos, lists and advisories naming the domain.
func TestDifferentialDomain(t *testing.T) {
	diffRequireNatsServer(t)
	d := newDifferOpts(t, func(o *server.Options) { o.JetStreamDomain = "HUB" })
	d.partial = true
	api := "$JS.HUB.API."
	d.req("domain account info", api+"INFO", "")
	d.req("domain account info plain", diffAPI+"INFO", "")
	d.req("domain stream create", api+"STREAM.CREATE.DS", `{"name":"DS","subjects":["ds.>"],"allow_direct":true,"allow_atomic":true}`)
	d.pub("domain pub", "ds.a", "one")
	d.pub("domain pub dup", "ds.a", "one", diffHdr("Nats-Msg-Id", "x"))
	d.pub("domain pub dup again", "ds.a", "one", diffHdr("Nats-Msg-Id", "x"))
	d.pub("domain pub wrong last seq", "ds.a", "two", diffHdr("Nats-Expected-Last-Sequence", "99"))
	d.pub("domain atomic batch", "ds.b", "three", diffHdr("Nats-Batch-Id", "b1"), diffHdr("Nats-Batch-Sequence", "1"), diffHdr("Nats-Batch-Commit", "1"))
	d.req("domain stream info", api+"STREAM.INFO.DS", "")
	d.req("domain stream info plain", diffAPI+"STREAM.INFO.DS", "")
	d.req("domain stream list", api+"STREAM.LIST", "")
	d.req("domain stream update", api+"STREAM.UPDATE.DS", `{"name":"DS","subjects":["ds.>"],"allow_direct":true,"allow_atomic":true,"max_msgs":100}`)
	d.req("domain consumer create", api+"CONSUMER.CREATE.DS.C", diffConsumerBody("DS", "", `{"durable_name":"C","ack_policy":"explicit"}`))
	d.frames("domain pull", api+"CONSUMER.MSG.NEXT.DS.C", "", `{"batch":1}`, 1)
	d.frames("domain direct get", api+"DIRECT.GET.DS", "", `{"seq":1}`, 1)
	d.req("domain consumer pause", api+"CONSUMER.PAUSE.DS.C", `{"pause_until":"2099-01-01T00:00:00Z"}`)
	d.req("domain consumer delete", api+"CONSUMER.DELETE.DS.C", "")
	d.req("domain unknown", api+"FOO", "", diffTimeout(300*time.Millisecond))
	d.req("domain stream delete", api+"STREAM.DELETE.DS", "")
	d.endOfRun()
	d.check()
}
