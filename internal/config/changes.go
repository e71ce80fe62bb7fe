package config

import (
	"reflect"
)

// Change is one setting that differs between two Configs.
type Change struct {
	Key string // the configuration key, from the field's key tag
	Old any
	New any
}

// Changes lists the settings of next that differ from prev, in the order
// of Config's fields. Fields tagged `key:"-"` (the file name and digest)
// are not compared.
func Changes(prev, next *Config) []Change {
	var out []Change
	walk(reflect.ValueOf(prev).Elem(), reflect.ValueOf(next).Elem(), func(key string, a, b reflect.Value) {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			out = append(out, Change{Key: key, Old: a.Interface(), New: b.Interface()})
		}
	})
	return out
}

// walk calls fn for every keyed leaf field of a and b, two values of the
// same struct type; untagged struct fields are walked into.
func walk(a, b reflect.Value, fn func(key string, a, b reflect.Value)) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, tagged := f.Tag.Lookup("key")
		switch {
		case key == "-":
		case !tagged && f.Type.Kind() == reflect.Struct:
			walk(a.Field(i), b.Field(i), fn)
		default:
			fn(key, a.Field(i), b.Field(i))
		}
	}
}
