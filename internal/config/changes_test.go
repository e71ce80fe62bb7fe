package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Changes names each differing setting by its key, which is what a reload
// refuses or applies.
func TestChanges(t *testing.T) {
	a, _ := mustLoad(t, "debug: false\nmax_payload: 1MB\njetstream { store_dir: /a }")
	b, _ := mustLoad(t, "debug: true\nmax_payload: 2MB\nping_interval: \"1m\"\njetstream { store_dir: /b }")
	got := Changes(a, b)
	want := []Change{
		{Key: "max_payload", Old: 1 << 20, New: 2 << 20},
		{Key: "ping_interval", Old: time.Duration(0), New: time.Minute},
		{Key: "debug", Old: false, New: true},
		{Key: "store_dir", Old: "/a", New: "/b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if c := Changes(a, a.Clone()); len(c) != 0 {
		t.Fatalf("a config differs from its clone: %+v", c)
	}
}

// Every leaf field of Config has a distinct key tag, so a reload can name
// what it refuses; an untagged field would be walked as a block.
func TestEveryFieldHasAKey(t *testing.T) {
	seen := map[string]bool{}
	var check func(t reflect.Type, path string)
	check = func(typ reflect.Type, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			key, tagged := f.Tag.Lookup("key")
			switch {
			case key == "-":
			case !tagged && f.Type.Kind() == reflect.Struct:
				check(f.Type, path+f.Name+".")
			case !tagged || key == "":
				t.Errorf("field %s%s has no key tag", path, f.Name)
			case seen[key]:
				t.Errorf("key %q is on two fields", key)
			default:
				seen[key] = true
				if strings.ToLower(key) != key {
					t.Errorf("key %q is not lower case", key)
				}
			}
		}
	}
	check(reflect.TypeFor[Config](), "")
}
