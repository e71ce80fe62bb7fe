package test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// A stream create answered by the cluster carries the server's version
// and API level in the config's metadata (_nats.ver, _nats.level), as
// nats-server v2.15.2's every stream config does: without them `nats
// stream add` printed "hosted at level " with nothing after it (trial 36).
func TestJetStreamClusterCreateAnswerHasServerMetadata(t *testing.T) {
	servers := jsCluster(t, 3)
	nc := connect(t, servers[1].ClientURL())
	var r struct {
		Config struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"config"`
		Error *struct {
			Code int `json:"err_code"`
		} `json:"error"`
	}
	eventually(t, "create META", func() error {
		msg, err := nc.Request("$JS.API.STREAM.CREATE.META", []byte(`{"name":"META","subjects":["meta.>"],"num_replicas":3}`), 5*time.Second)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(msg.Data, &r); err != nil || r.Error != nil {
			return fmt.Errorf("%q: %v", msg.Data, err)
		}
		return nil
	})
	if md := r.Config.Metadata; md["_nats.level"] == "" || md["_nats.ver"] == "" {
		t.Fatalf("the create's answer has metadata %v, want _nats.level and _nats.ver", md)
	}
}
