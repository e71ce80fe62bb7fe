package stream

import (
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// PrepareCreate checks the name against the request subject before the
// create rules (nats-server v2.15.2 jsStreamCreateRequest); PrepareUpdate
// validates first, so that an invalid config of another name gets the
// validation error (jsStreamUpdateRequest).
func TestPrepareOrder(t *testing.T) {
	bad := Config{Name: "X", Subjects: []string{"a"}, Sealed: true} // sealed at create: 10052
	if err := bad.PrepareCreate("Y", false); err == nil || err.ErrCode != uint16(jserr.StreamMismatch) {
		t.Errorf("create of X on subject Y: %v, want 10056 first", err)
	}
	if err := (&Config{Name: "X", Subjects: []string{"a"}, Sealed: true}).PrepareCreate("X", false); err == nil || err.ErrCode == uint16(jserr.StreamMismatch) {
		t.Errorf("sealed create: %v, want the create rule's error", err)
	}
	inv := Config{Name: "X", Subjects: []string{"a"}, MaxMsgsPerSubject: 1, DiscardNewPerSubject: true} // needs discard new
	if err := inv.PrepareUpdate("Y", false); err == nil || err.ErrCode == uint16(jserr.StreamMismatch) {
		t.Errorf("invalid update of X on subject Y: %v, want the validation error first", err)
	}
	ok := Config{Name: "X", Subjects: []string{"a"}}
	if err := ok.PrepareUpdate("Y", false); err == nil || err.ErrCode != uint16(jserr.StreamMismatch) {
		t.Errorf("valid update of X on subject Y: %v, want 10056", err)
	}
	if err := ok.PrepareUpdate("", false); err != nil {
		t.Errorf("update without a subject: %v", err)
	}
	if err := (&Config{Name: "X", Subjects: []string{"a"}}).PrepareCreate("", false); err != nil {
		t.Errorf("create without a subject: %v", err)
	}
}
