package test

import (
	"encoding/json"
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
	d.req("durable origin", c+"DSO", `{"name":"DSO","subjects":["dso.>"],"retention":"interest"}`)
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
	d.waitAcked("DSO", "DSC", 3)
	d.req("durable origin consumer info", diffAPI+"CONSUMER.INFO.DSO.DSC", "")
	d.req("durable origin info", diffAPI+"STREAM.INFO.DSO", "")
	d.req("durable source info", diffAPI+"STREAM.INFO.DSA", "")
	d.req("durable source delete", diffAPI+"STREAM.DELETE.DSA", "")
	d.req("durable origin delete", diffAPI+"STREAM.DELETE.DSO", "")
}

// waitAcked waits on both sides until consumer con of stream has its
// ack floor at stream sequence seq.
func (d *differ) waitAcked(stream, con string, seq uint64) {
	d.t.Helper()
	for _, s := range d.sides {
		waitFor(d.t, 10*time.Second, con+" acknowledged through "+fmt.Sprint(seq), func() bool {
			r, err := s.nc.Request(diffAPI+"CONSUMER.INFO."+stream+"."+con, nil, diffReqTimeout)
			if err != nil {
				return false
			}
			var ci struct {
				AckFloor struct {
					Stream uint64 `json:"stream_seq"`
				} `json:"ack_floor"`
				NumAckPending int `json:"num_ack_pending"`
			}
			return json.Unmarshal(r.Data, &ci) == nil && ci.AckFloor.Stream == seq && ci.NumAckPending == 0
		})
	}
}
