// Package logger writes log lines in nats-server's format:
//
//	[<pid>] 2006/01/02 15:04:05.000000 [INF] message
//
// Levels are INF (Noticef), WRN (Warnf), ERR (Errorf), FTL (Fatalf), DBG
// (Debugf, only with debug on) and TRC (Tracef, only with trace on), as
// nats-server v2.15.2's logger prints them. Without timestamps (logtime:
// false) a line is "[<pid>] [INF] message". A Logger is safe for
// concurrent use: each line is written with one Write call under a mutex,
// and the levels and the timestamp format may change at any time (a
// configuration reload).
//
// With SetJSON(true) (cairn's log_format: json; nats-server has no JSON
// log) each line is one JSON object instead, for log collectors:
//
//	{"time":"2026-11-29T10:08:39.123456Z","level":"INF","pid":4711,"msg":"message"}
//
// time is RFC 3339 with microseconds (in UTC with logtime_utc, else local
// time with its offset) and left out with logtime: false; level is the
// same three letters; msg is the formatted message, JSON-escaped.
package logger

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Logger writes levelled lines to one io.Writer. The zero value is not
// usable; build one with New or Discard.
type Logger struct {
	debug atomic.Bool
	trace atomic.Bool

	mu     sync.Mutex
	w      io.Writer // guarded by mu
	noTime bool      // guarded by mu: no timestamps (logtime: false)
	utc    bool      // guarded by mu: timestamps in UTC (logtime_utc)
	json   bool      // guarded by mu: one JSON object per line (log_format: json)
	pid    string
	pidNum int
	now    func() time.Time
	buf    []byte // guarded by mu
}

// New returns a Logger writing to w (usually os.Stderr or a log file),
// with local-time timestamps. debug enables [DBG] lines (flag -D), trace
// enables [TRC] lines (flag -V).
func New(w io.Writer, debug, trace bool) *Logger {
	l := &Logger{w: w, pid: fmt.Sprintf("[%d] ", os.Getpid()), pidNum: os.Getpid(), now: time.Now}
	l.SetDebug(debug)
	l.SetTrace(trace)
	return l
}

// SetDebug turns [DBG] lines on or off.
func (l *Logger) SetDebug(on bool) { l.debug.Store(on) }

// SetTrace turns [TRC] lines on or off.
func (l *Logger) SetTrace(on bool) { l.trace.Store(on) }

// SetTime sets the timestamp of each line: none unless on (nats-server's
// logtime), in UTC when utc (logtime_utc) and otherwise in local time.
func (l *Logger) SetTime(on, utc bool) {
	l.mu.Lock()
	l.noTime, l.utc = !on, utc
	l.mu.Unlock()
}

// SetJSON switches between nats-server's line format (false) and one
// JSON object per line (true; see the package comment).
func (l *Logger) SetJSON(on bool) {
	l.mu.Lock()
	l.json = on
	l.mu.Unlock()
}

// SetOutput makes the Logger write to w from now on (log file reopening).
func (l *Logger) SetOutput(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

// Discard returns a Logger that writes nothing; tests and embedders use it.
func Discard() *Logger { return New(io.Discard, false, false) }

// Noticef logs an [INF] line.
func (l *Logger) Noticef(format string, v ...any) { l.logf("INF", format, v...) }

// Warnf logs a [WRN] line.
func (l *Logger) Warnf(format string, v ...any) { l.logf("WRN", format, v...) }

// Errorf logs an [ERR] line.
func (l *Logger) Errorf(format string, v ...any) { l.logf("ERR", format, v...) }

// Fatalf logs an [FTL] line. It does not exit; the caller decides.
func (l *Logger) Fatalf(format string, v ...any) { l.logf("FTL", format, v...) }

// Debugf logs a [DBG] line when debug is on.
func (l *Logger) Debugf(format string, v ...any) {
	if l.debug.Load() {
		l.logf("DBG", format, v...)
	}
}

// Tracef logs a [TRC] line when trace is on.
func (l *Logger) Tracef(format string, v ...any) {
	if l.trace.Load() {
		l.logf("TRC", format, v...)
	}
}

// TraceEnabled reports whether Tracef writes anything, so hot paths can skip
// formatting.
func (l *Logger) TraceEnabled() bool { return l.trace.Load() }

func (l *Logger) logf(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == io.Discard {
		return
	}
	var b []byte
	if l.json {
		b = l.appendJSON(l.buf[:0], level, fmt.Sprintf(format, v...))
	} else {
		b = append(l.buf[:0], l.pid...)
		if !l.noTime {
			b = l.stamp().AppendFormat(b, "2006/01/02 15:04:05.000000 ")
		}
		b = append(b, '[')
		b = append(b, level...)
		b = append(b, "] "...)
		b = fmt.Appendf(b, format, v...)
	}
	b = append(b, '\n')
	_, _ = l.w.Write(b)
	l.buf = b
}

// stamp is the time of a line, in UTC with logtime_utc.
func (l *Logger) stamp() time.Time {
	now := l.now()
	if l.utc {
		now = now.UTC()
	}
	return now
}

// appendJSON appends a line's JSON object (package comment).
func (l *Logger) appendJSON(b []byte, level, msg string) []byte {
	b = append(b, '{')
	if !l.noTime {
		b = append(b, `"time":"`...)
		b = l.stamp().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
		b = append(b, `",`...)
	}
	b = append(b, `"level":"`...)
	b = append(b, level...)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(l.pidNum), 10)
	b = append(b, `,"msg":`...)
	q, _ := json.Marshal(msg) // a string always marshals
	b = append(b, q...)
	return append(b, '}')
}
