package metafile

import (
	"errors"
	"testing"

	"github.com/cairnmq/cairn/internal/vfs"
)

type sample struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

// A written file reads back; a flipped byte, a missing checksum line or
// bad JSON under a good checksum is ErrCorrupt (package comment).
func TestWriteRead(t *testing.T) {
	fs := vfs.NewCrashFS()
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	if err := Write(fs, "/d", sample{"x", 7}); err != nil {
		t.Fatal(err)
	}
	var got sample
	if err := Read(fs, "/d", &got); err != nil || got != (sample{"x", 7}) {
		t.Fatalf("read %+v, %v", got, err)
	}
	good, _ := Encode(sample{"x", 7})
	flipped := append([]byte(nil), good...)
	flipped[3] ^= 1
	for name, b := range map[string][]byte{"flipped": flipped, "no checksum": good[:len(good)-9], "empty": nil} {
		if err := Decode(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if err := RemoveAll(fs, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := Read(fs, "/d", &got); err == nil {
		t.Fatal("read after RemoveAll")
	}
}
