package test

import (
	"fmt"
	"time"
)

// durableSources compares durable source and mirror consumers (ADR-60;
// docs/durable-sourcing.md): the configs refused, the stream created, the
// copies (their Nats-Stream-Source header byte for byte), the sourcing
// stream's info and the origin's consumer once the flow control replies
// acknowledged the copies.
func (d *differ) durableSources() {
	c := diffAPI + "STREAM.CREATE."
	d.req("durable origin", c+"DSO", `{"name":"DSO","subjects":["dso.>"],"retention":"interest","allow_direct":true}`)
	d.req("durable origin consumer", diffAPI+"CONSUMER.CREATE.DSO.DSC", diffConsumerBody("DSO", "", `{"durable_name":"DSC","deliver_subject":"dsdlv","ack_policy":"flow_control","max_ack_pending":50}`))
	d.pub("durable pub 1", "dso.1", "one")
	d.pub("durable pub 2", "dso.2", "two", diffHdr("X", "2"))
	d.req("durable source bad consumer name", c+"DSX", `{"name":"DSX","sources":[{"name":"DSO","consumer":{"name":"a.b","deliver_subject":"dsdlv"}}]}`)
	d.req("durable source consumer twice", c+"DSX", `{"name":"DSX","sources":[{"name":"DSO","consumer":{"name":"DSC","deliver_subject":"dsdlv"}},{"name":"DSO","subject_transforms":[{"src":"dso.1","dest":"x"}],"consumer":{"name":"DSC","deliver_subject":"dsdlv"}}]}`)
	d.req("durable mirror with filter", c+"DSX", `{"name":"DSX","mirror":{"name":"DSO","filter_subject":"dso.1","consumer":{"name":"DSC","deliver_subject":"dsdlv"}}}`)
	d.req("durable source", c+"DSA", `{"name":"DSA","allow_direct":true,"sources":[{"name":"DSO","consumer":{"name":"DSC","deliver_subject":"dsdlv"}}]}`)
	d.waitSubject("DSA", "dso.2")
	d.pub("durable pub 3", "dso.3", "three")
	d.waitSubject("DSA", "dso.3")
	dg := diffAPI + "DIRECT.GET.DSA"
	d.frames("durable copy 1", dg, "", `{"seq":1}`, 1)
	d.frames("durable copy 2", dg, "", `{"seq":2}`, 1)
	d.frames("durable copy 3", dg, "", `{"seq":3}`, 1)
	d.waitGone("DSO", 3)
	d.req("durable origin consumer info", diffAPI+"CONSUMER.INFO.DSO.DSC", "")
	d.req("durable origin info", diffAPI+"STREAM.INFO.DSO", "")
	d.req("durable source info", diffAPI+"STREAM.INFO.DSA", "")
	d.req("durable source delete", diffAPI+"STREAM.DELETE.DSA", "")
	d.req("durable origin delete", diffAPI+"STREAM.DELETE.DSO", "")
}

// waitGone waits on both sides until the direct get of seq from stream
// answers 404 (an interest origin removed it once acknowledged): direct
// gets are not counted in the account's API statistics, which the area's
// account info compares.
func (d *differ) waitGone(stream string, seq uint64) {
	d.t.Helper()
	for _, s := range d.sides {
		waitFor(d.t, 10*time.Second, fmt.Sprintf("%s to remove %d", stream, seq), func() bool {
			r, err := s.nc.Request(diffAPI+"DIRECT.GET."+stream, []byte(fmt.Sprintf(`{"seq":%d}`, seq)), diffReqTimeout)
			return err == nil && r.Header.Get("Status") == "404"
		})
	}
}
