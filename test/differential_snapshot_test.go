package test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// snapshotRestore compares STREAM.SNAPSHOT and STREAM.RESTORE: the
// request checks, a snapshot's answer and frames (the compressed bytes
// hold times and differ; their frames' shapes are compared), and the
// restore of the same snapshot (one nats-server v2.15.2 made, from
// internal/snapshot/testdata) into both servers, whole, damaged and cut
// short, with the stream and consumer it restores.
func (d *differ) snapshotRestore() {
	snap := diffAPI + "STREAM.SNAPSHOT."
	rest := diffAPI + "STREAM.RESTORE."
	d.req("create snapshot stream", diffAPI+"STREAM.CREATE.SN", `{"name":"SN","subjects":["sn.>"]}`)
	d.pub("pub sn 1", "sn.a", "one", diffHdr("X", "1"))
	d.pub("pub sn 2", "sn.b", "two")
	d.req("consumer create snapshot durable", diffAPI+"CONSUMER.CREATE.SN.SD", diffConsumerBody("SN", "", `{"durable_name":"SD","ack_policy":"explicit"}`))

	d.req("snapshot empty body", snap+"SN", "")
	d.req("snapshot empty object", snap+"SN", "{}")
	d.req("snapshot unknown stream", snap+"NOPE", `{"deliver_subject":"x"}`)
	d.req("snapshot invalid json", snap+"SN", `{"deliver_subject":`)
	d.req("snapshot no deliver subject", snap+"SN", `{"no_consumers":true}`)
	d.req("snapshot wildcard deliver subject", snap+"SN", `{"deliver_subject":"a.*"}`)
	d.snapshotFrames("snapshot small", "SN", `{"deliver_subject":"_SNAP.1"}`, "_SNAP.1")
	d.snapshotFrames("snapshot small no consumers", "SN", `{"deliver_subject":"_SNAP.2","no_consumers":true}`, "_SNAP.2")

	cfg := `{"name":"BK","subjects":["bk.>"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"allow_direct":true}`
	body := `{"config":` + cfg + `,"state":{"messages":2}}`
	d.req("restore empty body", rest+"BK", "")
	d.req("restore invalid json", rest+"BK", `{"config":`)
	d.req("restore name mismatch", rest+"BK", `{"config":{"name":"OTHER"}}`)
	d.req("restore bad config", rest+"BK", `{"config":{"name":"BK","retention":"sometimes"}}`)
	d.req("restore existing stream", rest+"SN", `{"config":{"name":"SN","subjects":["sn.>"]}}`)
	good, err := os.ReadFile("../internal/snapshot/testdata/nats-server-2.15.2.arc.s2")
	if err != nil {
		d.t.Fatal(err)
	}
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)/2] ^= 0x20
	d.restoreChunks("restore damaged", "BK", body, damaged)
	d.restoreChunks("restore truncated", "BK", body, good[:len(good)-20])
	d.req("stream info after failed restores", diffAPI+"STREAM.INFO.BK", "")
	d.restoreChunks("restore", "BK", body, good)
	d.req("stream info restored", diffAPI+"STREAM.INFO.BK", "")
	d.req("consumer info restored", diffAPI+"CONSUMER.INFO.BK.C1", "")
	d.frames("pull restored consumer", diffAPI+"CONSUMER.MSG.NEXT.BK.C1", "", `{"batch":1,"no_wait":true}`, 1)
	d.pub("pub after restore", "bk.x", "after")
}

// snapshotFrames sends a snapshot request whose snapshot fits in one
// chunk, compares the answers, then reads the frames on a subscription
// of exactly deliver (the server waits for one) until the empty one that
// ends the snapshot, and compares their shapes: subject, reply, header,
// and whether there is data.
func (d *differ) snapshotFrames(label, stream, body, deliver string) {
	d.t.Helper()
	for _, s := range d.sides {
		s.raw.send("SUB " + deliver + " 2\r\n")
		s.raw.sync()
	}
	d.req(label, diffAPI+"STREAM.SNAPSHOT."+stream, body)
	d.useLabel(label + " frames")
	d.nFrame++
	res := diffBoth(d, func(s *diffSide) []string {
		var fs []string
		for range 4 {
			f, err := diffReadFrame(s.raw, 5*time.Second)
			if err != nil {
				return append(fs, "<"+err.Error()+">")
			}
			line, rest, _ := strings.Cut(f, "\r\n")
			fields := strings.Fields(line)
			shape := strings.Join(fields[:len(fields)-1], " ") // without the total size
			if rest == "\r\n" || strings.HasSuffix(rest, "\r\n\r\n\r\n") {
				fs = append(fs, shape+" "+strings.TrimSuffix(rest, "\r\n")+"<end>")
				return fs
			}
			fs = append(fs, shape+" <data>")
		}
		return fs
	})
	d.compareFrames(label+" frames", res[0], res[1])
	for _, s := range d.sides {
		s.raw.send("UNSUB 2\r\n")
		s.raw.sync()
	}
}

// restoreChunks sends a restore request, then data in 64 KiB chunks and
// the empty message that ends it to the deliver subject each server
// named, as `nats stream restore` does, and compares the answers: the
// request's, every chunk's, the last one's.
func (d *differ) restoreChunks(label, stream, body string, data []byte) {
	d.t.Helper()
	d.useLabel(label)
	d.nJSON++
	type outcome struct {
		start  string
		chunks []string
		last   string
	}
	res := diffBoth(d, func(s *diffSide) outcome {
		var o outcome
		r, err := s.nc.Request(diffAPI+"STREAM.RESTORE."+stream, []byte(body), diffReqTimeout)
		if err != nil {
			o.start = "<" + err.Error() + ">"
			return o
		}
		o.start = string(r.Data)
		subj := diffRestoreSubjectRe.FindStringSubmatch(o.start)
		if subj == nil {
			return o
		}
		for rest := data; len(rest) > 0; {
			n := min(64<<10, len(rest))
			a, err := s.nc.Request(subj[1], rest[:n], diffReqTimeout)
			rest = rest[n:]
			if err != nil {
				o.chunks = append(o.chunks, "<"+err.Error()+">")
				return o
			}
			o.chunks = append(o.chunks, string(a.Data))
			if len(a.Data) > 0 {
				return o // an error: the restore is over
			}
		}
		a, err := s.nc.Request(subj[1], nil, 10*time.Second)
		switch {
		case errors.Is(err, nats.ErrTimeout):
			o.last = "<timeout>"
		case err != nil:
			o.last = "<" + err.Error() + ">"
		default:
			o.last = string(a.Data)
		}
		return o
	})
	d.dump(label, "STREAM.RESTORE."+stream, body, fmt.Sprintf("%+v", res[0]), fmt.Sprintf("%+v", res[1]))
	d.compareJSON(label, res[0].start, res[1].start, false)
	d.compareFrames(label+" chunk answers", res[0].chunks, res[1].chunks)
	if res[0].last != "" || res[1].last != "" {
		d.compareJSON(label+" last answer", res[0].last, res[1].last, false)
	}
}
