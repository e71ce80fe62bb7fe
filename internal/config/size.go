package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the first letters of the size suffixes, in increasing
// powers.
const sizeUnits = "kmgtpe"

// ParseSize reads a byte count written as an integer of the configuration
// file is (nats-server v2.15.2 conf/parse.go): digits with an optional
// suffix, in any case, where k, m, g, t, p, e are powers of 1000 and kb,
// ki, kib (mb, mi, mib, ...) powers of 1024. It refuses negative,
// malformed and out-of-range values. The flags that take sizes use it.
func ParseSize(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	mult, ok := sizeMultiplier(s[len(digits):])
	n, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q", v)
	}
	return n * mult, nil
}

// sizeMultiplier returns the bytes one unit of suffix stands for.
func sizeMultiplier(suffix string) (int64, bool) {
	if suffix == "" {
		return 1, true
	}
	i := strings.IndexByte(sizeUnits, suffix[0])
	if i < 0 {
		return 0, false
	}
	base := int64(1000)
	switch suffix[1:] {
	case "":
	case "b", "i", "ib":
		base = 1024
	default:
		return 0, false
	}
	mult := int64(1)
	for range i + 1 {
		mult *= base
	}
	return mult, true
}
