package stream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron patterns of message schedules (ADR-51, "Schedule Format"), read as
// nats-server v2.15.2 reads them (server/cron.go): six fields separated
// by white space,
//
//	second minute hour day-of-month month day-of-week
//
// each a comma-separated list (empty items skipped) of "*" or "?" (the
// whole range), a number or name, or a range "a-b", any of them
// optionally followed by "/step" ("a/step" runs from a to the field's
// maximum). Months and days of the week may be named by their first
// three letters, in any case. When both day fields are restricted (no
// "*"), a day matches either; otherwise it must match both. The next
// time is the first whole second after the given time, in the given
// location, that matches every field, searched up to five years ahead.

// cronField is the range and names of one field.
type cronField struct {
	min, max uint
	names    map[string]uint
}

var cronFields = [6]cronField{
	{0, 59, nil}, // second
	{0, 59, nil}, // minute
	{0, 23, nil}, // hour
	{1, 31, nil}, // day of month
	{1, 12, map[string]uint{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{0, 6, map[string]uint{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// cronStar marks a field whose list holds a "*" or "?" without a step
// above 1; the day fields use it.
const cronStar = uint64(1) << 63

// errCronNever is the error of a pattern that cannot match within the
// search.
var errCronNever = errors.New("pattern exceeds maximum range")

// cronSpec is a parsed pattern: one bit per allowed value of each field.
type cronSpec [6]uint64

// parseCronSpec parses the six fields of pattern.
func parseCronSpec(pattern string) (cronSpec, error) {
	var spec cronSpec
	fields := strings.Fields(pattern)
	if len(fields) != len(spec) {
		return spec, fmt.Errorf("pattern requires 6 fields, got %d", len(fields))
	}
	for i, f := range fields {
		for item := range strings.SplitSeq(f, ",") {
			if item == "" {
				continue
			}
			bits, err := cronItem(item, cronFields[i])
			if err != nil {
				return spec, err
			}
			spec[i] |= bits
		}
	}
	return spec, nil
}

// cronItem returns the bits of one list item of a field.
func cronItem(item string, f cronField) (uint64, error) {
	rangePart, stepPart, hasStep := strings.Cut(item, "/")
	if strings.Contains(stepPart, "/") {
		return 0, fmt.Errorf("too many slashes: %s", item)
	}
	bounds := strings.Split(rangePart, "-")
	var lo, hi uint
	var star uint64
	var err error
	switch {
	case bounds[0] == "*" || bounds[0] == "?":
		lo, hi, star = f.min, f.max, cronStar
	case len(bounds) > 2:
		return 0, fmt.Errorf("too many hyphens: %s", item)
	default:
		if lo, err = cronNumber(bounds[0], f.names); err != nil {
			return 0, err
		}
		hi = lo
		if len(bounds) == 2 {
			if hi, err = cronNumber(bounds[1], f.names); err != nil {
				return 0, err
			}
		}
	}
	step := uint(1)
	if hasStep {
		if step, err = cronNumber(stepPart, nil); err != nil {
			return 0, err
		}
		if len(bounds) == 1 {
			hi = f.max // "a/step" runs to the end of the field
		}
		if step > 1 {
			star = 0
		}
	}
	switch {
	case lo < f.min:
		return 0, fmt.Errorf("beginning of range (%d) below minimum (%d): %s", lo, f.min, item)
	case hi > f.max:
		return 0, fmt.Errorf("end of range (%d) above maximum (%d): %s", hi, f.max, item)
	case lo > hi:
		return 0, fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", lo, hi, item)
	case step == 0:
		return 0, fmt.Errorf("step of range should be a positive number: %s", item)
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << v
	}
	return bits | star, nil
}

// cronNumber reads a number (strconv.Atoi, so a sign is allowed, not a
// negative value) or, with names, a name in any case.
func cronNumber(s string, names map[string]uint) (uint, error) {
	if v, ok := names[strings.ToLower(s)]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("failed to parse int from %s: %w", s, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, s)
	}
	return uint(n), nil
}

// has reports whether field i allows v.
func (c *cronSpec) has(i int, v int) bool { return c[i]&(1<<uint(v)) != 0 }

// dayMatches reports whether t's day satisfies the day fields.
func (c *cronSpec) dayMatches(t time.Time) bool {
	dom, dow := c.has(3, t.Day()), c.has(5, int(t.Weekday()))
	if c[3]&cronStar != 0 || c[5]&cronStar != 0 {
		return dom && dow
	}
	return dom || dow
}

// never reports whether a field allows no value at all, so that no time
// can match (nats-server would search five years to find that out).
func (c *cronSpec) never() bool {
	for _, i := range []int{0, 1, 2, 4} {
		if c[i]&^cronStar == 0 {
			return true
		}
	}
	dom, dow := c[3]&^cronStar, c[5]&^cronStar
	if c[3]&cronStar != 0 || c[5]&cronStar != 0 {
		return dom == 0 || dow == 0
	}
	return dom == 0 && dow == 0
}

// next returns the first time after ts (unix ns) that matches, in loc,
// or errCronNever when none comes within five years. It takes the steps
// of nats-server v2.15.2 parseCron: month, day, hour, minute, second,
// each moving on until it matches (zeroing the smaller units the first
// time any does), and starting over from the month when one wraps.
func (c *cronSpec) next(ts int64, loc *time.Location) (time.Time, error) {
	if c.never() {
		return time.Time{}, errCronNever
	}
	t := time.Unix(0, ts).In(loc).Truncate(time.Second).Add(time.Second)
	limit := t.Year() + 5
	zeroed := false
	zero := func(z time.Time) {
		if !zeroed {
			zeroed = true
			t = z
		}
	}
wrap:
	for {
		if t.Year() > limit {
			return time.Time{}, errCronNever
		}
		for !c.has(4, int(t.Month())) {
			zero(time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc))
			if t = t.AddDate(0, 1, 0); t.Month() == time.January {
				continue wrap
			}
		}
		for !c.dayMatches(t) {
			zero(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc))
			if t = t.AddDate(0, 0, 1); t.Day() == 1 {
				continue wrap
			}
		}
		for !c.has(2, t.Hour()) {
			zero(time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc))
			if t = t.Add(time.Hour); t.Hour() == 0 {
				continue wrap
			}
		}
		for !c.has(1, t.Minute()) {
			zero(t.Truncate(time.Minute))
			if t = t.Add(time.Minute); t.Minute() == 0 {
				continue wrap
			}
		}
		for !c.has(0, t.Second()) {
			zero(t.Truncate(time.Second))
			if t = t.Add(time.Second); t.Second() == 0 {
				continue wrap
			}
		}
		return t, nil
	}
}
