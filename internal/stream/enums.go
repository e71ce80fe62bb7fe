package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The enumerations of StreamConfig (nats-server v2.15.2's enumerations). On the wire
// they are lowercase JSON strings; the numeric values are cairn's own and
// never leave the process (meta.json holds the strings). The decoders
// accept exactly what nats-server v2.15.2 accepts (server/store.go,
// filestore.go, stream.go) and fail with its error text, which the API
// layer reports as 10025 "invalid JSON: <text>".

// RetentionPolicy says when a message leaves the stream (nats-server v2.15.2's retention policies).
type RetentionPolicy int

// Retention policies; the zero value is the default.
const (
	LimitsPolicy    RetentionPolicy = iota // "limits"
	InterestPolicy                         // "interest"
	WorkQueuePolicy                        // "workqueue"
)

// StorageType says which engine holds the messages.
type StorageType int

// Storage types; the zero value is the default.
const (
	FileStorage   StorageType = iota // "file"
	MemoryStorage                    // "memory"
)

// DiscardPolicy says what a full stream does with a new message
// (nats-server v2.15.2's limits and discard policies).
type DiscardPolicy int

// Discard policies; the zero value is the default.
const (
	DiscardOld DiscardPolicy = iota // "old"
	DiscardNew                      // "new"
)

// Compression is the stream's storage compression. It is a storage
// detail only: clients never see compressed data.
type Compression int

// Compression algorithms; the zero value is the default.
const (
	NoCompression Compression = iota // "none"
	S2Compression                    // "s2"
)

// PersistMode is the persist_mode of StreamConfig (API level 2).
type PersistMode int

// Persist modes; the zero value is the default and is omitted from JSON.
const (
	DefaultPersist PersistMode = iota // "default"
	AsyncPersist                      // "async"
)

var (
	retentionNames   = []string{"limits", "interest", "workqueue"}
	storageNames     = []string{"file", "memory"}
	discardNames     = []string{"old", "new"}
	compressionNames = []string{"none", "s2"}
	persistNames     = []string{"default", "async"}
)

// errUnknownCompression is nats-server's text for a bad compression value.
var errUnknownCompression = errors.New("unknown compression algorithm")

// marshalEnum returns the JSON string for v, or nats-server's "can not
// marshal" error for a value outside names.
func marshalEnum(v int, names []string, kind string) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("can not marshal %s %d", kind, v)
	}
	return []byte(`"` + names[v] + `"`), nil
}

// unmarshalEnum returns the index in names of the raw JSON string data,
// compared byte for byte (quotes included), or nats-server's error.
func unmarshalEnum(data []byte, names []string) (int, error) {
	for i, n := range names {
		if string(data) == `"`+n+`"` {
			return i, nil
		}
	}
	return 0, fmt.Errorf("can not unmarshal %q", data)
}

// String returns the JSON name of p.
func (p RetentionPolicy) String() string { return enumString(int(p), retentionNames) }

// MarshalJSON encodes p as "limits", "interest" or "workqueue".
func (p RetentionPolicy) MarshalJSON() ([]byte, error) {
	return marshalEnum(int(p), retentionNames, "retention")
}

// UnmarshalJSON accepts exactly "limits", "interest" or "workqueue".
func (p *RetentionPolicy) UnmarshalJSON(data []byte) error {
	v, err := unmarshalEnum(data, retentionNames)
	if err == nil {
		*p = RetentionPolicy(v)
	}
	return err
}

// String returns the JSON name of t.
func (t StorageType) String() string { return enumString(int(t), storageNames) }

// MarshalJSON encodes t as "file" or "memory".
func (t StorageType) MarshalJSON() ([]byte, error) {
	return marshalEnum(int(t), storageNames, "storage")
}

// UnmarshalJSON accepts exactly "file" or "memory".
func (t *StorageType) UnmarshalJSON(data []byte) error {
	v, err := unmarshalEnum(data, storageNames)
	if err == nil {
		*t = StorageType(v)
	}
	return err
}

// String returns the JSON name of d.
func (d DiscardPolicy) String() string { return enumString(int(d), discardNames) }

// MarshalJSON encodes d as "old" or "new".
func (d DiscardPolicy) MarshalJSON() ([]byte, error) {
	return marshalEnum(int(d), discardNames, "discard")
}

// UnmarshalJSON accepts "old" or "new" in any letter case, as nats-server
// does for this one enumeration.
func (d *DiscardPolicy) UnmarshalJSON(data []byte) error {
	v, err := unmarshalEnum([]byte(strings.ToLower(string(data))), discardNames)
	if err != nil {
		return fmt.Errorf("can not unmarshal %q", data)
	}
	*d = DiscardPolicy(v)
	return nil
}

// String returns the JSON name of c.
func (c Compression) String() string { return enumString(int(c), compressionNames) }

// MarshalJSON encodes c as "none" or "s2".
func (c Compression) MarshalJSON() ([]byte, error) {
	if c < 0 || int(c) >= len(compressionNames) {
		return nil, errUnknownCompression
	}
	return marshalEnum(int(c), compressionNames, "compression")
}

// UnmarshalJSON accepts a JSON string "none" or "s2" (escapes allowed, as
// the value is decoded as a string first, like nats-server does).
func (c *Compression) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	for i, n := range compressionNames {
		if s == n {
			*c = Compression(i)
			return nil
		}
	}
	return errUnknownCompression
}

// String returns the JSON name of m.
func (m PersistMode) String() string { return enumString(int(m), persistNames) }

// MarshalJSON encodes m as "default" or "async". The Config field is
// omitempty, so the default is normally left out.
func (m PersistMode) MarshalJSON() ([]byte, error) {
	return marshalEnum(int(m), persistNames, "persist mode")
}

// UnmarshalJSON accepts "default", "" (the default) or "async".
func (m *PersistMode) UnmarshalJSON(data []byte) error {
	if string(data) == `""` {
		*m = DefaultPersist
		return nil
	}
	v, err := unmarshalEnum(data, persistNames)
	if err == nil {
		*m = PersistMode(v)
	}
	return err
}

// enumString returns names[v], or a marker for an out-of-range value.
func enumString(v int, names []string) string {
	if v < 0 || v >= len(names) {
		return fmt.Sprintf("unknown(%d)", v)
	}
	return names[v]
}
