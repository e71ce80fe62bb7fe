package config

import "fmt"

// Log is where and what the server logs (nats-server's logging keys,
// docs/configuration.md, Keys).
type Log struct {
	File    string `key:"log_file"`    // "" = stderr
	Debug   bool   `key:"debug"`       // [DBG] lines (-D)
	Trace   bool   `key:"trace"`       // [TRC] lines, the protocol (-V)
	Time    bool   `key:"logtime"`     // timestamps on each line; true by default
	TimeUTC bool   `key:"logtime_utc"` // timestamps in UTC instead of local time
	// SizeLimit, when above 0, rotates the log file once it holds more
	// bytes: it is renamed <file>.<yyyy.mm.dd.hh.mm.ss.nnnnnnnnn> and a new
	// one started (nats-server's logfile_size_limit).
	SizeLimit int64 `key:"logfile_size_limit"`
	// MaxNum, when above 0, keeps at most that many files, the current
	// one included, removing the oldest rotated ones (logfile_max_num).
	MaxNum int `key:"logfile_max_num"`
	// JSON writes each line as one JSON object (cairn's own key
	// log_format: "json"; "text", the default, is nats-server's format;
	// internal/logger's package comment draws both).
	JSON bool `key:"log_format"`
}

// loggingKeys are nats-server v2.15.2's logging keys.
var loggingKeys = keyTable{
	"debug":              func(c *Config, it item, r *report) { setBool(&c.Log.Debug, it, r) },
	"trace":              func(c *Config, it item, r *report) { setBool(&c.Log.Trace, it, r) },
	"trace_verbose":      traceVerboseKey,
	"trace_headers":      traceHeadersKey,
	"logtime":            func(c *Config, it item, r *report) { setBool(&c.Log.Time, it, r) },
	"logtime_utc":        func(c *Config, it item, r *report) { setBool(&c.Log.TimeUTC, it, r) },
	"log_file":           logFileKey,
	"logfile":            logFileKey,
	"syslog":             ignoredIfTrue("cairn logs to stderr or to log_file"),
	"remote_syslog":      ignoredIfSet("cairn logs to stderr or to log_file"),
	"log_size_limit":     logSizeLimitKey,
	"logfile_size_limit": logSizeLimitKey,
	"logfile_max_num":    logMaxNumKey,
	"log_max_num":        logMaxNumKey,
	"max_traced_msg_len": ignoredIfSet("cairn traces whole messages"),
	"log_format":         logFormatKey,
}

// logFormatKey reads cairn's log_format: "text" (nats-server's lines) or
// "json".
func logFormatKey(c *Config, it item, r *report) {
	s, ok := r.stringOf(it)
	if !ok {
		return
	}
	json, err := ParseLogFormat(s)
	if err != nil {
		r.errorf(it, "%v", err)
		return
	}
	c.Log.JSON = json
}

// ParseLogFormat reads a log_format value: "text" gives false, "json"
// true; anything else is an error naming both.
func ParseLogFormat(s string) (json bool, err error) {
	switch s {
	case "text":
		return false, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("invalid log_format %q: use \"text\" or \"json\"", s)
}

func setBool(dst *bool, it item, r *report) {
	if b, ok := r.boolOf(it); ok {
		*dst = b
	}
}

// traceVerboseKey: nats-server's verbose trace adds the system account's
// traffic, which cairn does not have, so it is trace.
func traceVerboseKey(c *Config, it item, r *report) { setBool(&c.Log.Trace, it, r) }

// traceHeadersKey: nats-server then traces message headers and not
// payloads; cairn traces both.
func traceHeadersKey(c *Config, it item, r *report) {
	b, ok := r.boolOf(it)
	if !ok {
		return
	}
	c.Log.Trace = b
	if b {
		r.ignored(it, "cairn's trace shows payloads as well as headers")
	}
}

// logSizeLimitKey reads a size (nats-server takes 10MB or a number of
// bytes).
func logSizeLimitKey(c *Config, it item, r *report) {
	if n, ok := r.int64Of(it); ok {
		if n < 0 {
			r.errorf(it, "%s can not be negative", it.key)
			return
		}
		c.Log.SizeLimit = n
	}
}

func logMaxNumKey(c *Config, it item, r *report) {
	if n, ok := r.int64Of(it); ok {
		if n < 0 {
			r.errorf(it, "%s can not be negative", it.key)
			return
		}
		c.Log.MaxNum = int(n)
	}
}

func logFileKey(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.Log.File = s
	}
}

// ignoredIfTrue warns about a boolean key set to true; false is what cairn
// does anyway.
func ignoredIfTrue(why string) keyFunc {
	return func(_ *Config, it item, r *report) {
		if b, ok := r.boolOf(it); ok && b {
			r.ignored(it, why)
		}
	}
}

// ignoredIfSet warns about a key set to anything but its zero value.
func ignoredIfSet(why string) keyFunc {
	return func(_ *Config, it item, r *report) {
		switch v := it.val.(type) {
		case string:
			if v == "" {
				return
			}
		case int64:
			if v == 0 {
				return
			}
		case bool:
			if !v {
				return
			}
		}
		r.ignored(it, why)
	}
}
