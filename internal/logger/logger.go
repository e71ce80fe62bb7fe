// Package logger writes log lines in nats-server's format:
//
//	[<pid>] 2006/01/02 15:04:05.000000 [INF] message
//
// Levels are INF (Noticef), WRN (Warnf), ERR (Errorf), FTL (Fatalf), DBG
// (Debugf, only with debug on) and TRC (Tracef, only with trace on), as
// nats-server v2.15.2's logger prints them. A Logger is safe for concurrent
// use: each line is written with one Write call under a mutex.
package logger

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Logger writes levelled lines to one io.Writer. The zero value is not
// usable; build one with New or Discard.
type Logger struct {
	mu    sync.Mutex
	w     io.Writer
	pid   string
	debug bool
	trace bool
	now   func() time.Time
	buf   []byte
}

// New returns a Logger writing to w (usually os.Stderr or a log file).
// debug enables [DBG] lines (flag -D), trace enables [TRC] lines (flag -V).
func New(w io.Writer, debug, trace bool) *Logger {
	return &Logger{w: w, pid: fmt.Sprintf("[%d] ", os.Getpid()), debug: debug, trace: trace, now: time.Now}
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
func (l *Logger) Noticef(format string, v ...any) { l.logf("[INF] ", format, v...) }

// Warnf logs a [WRN] line.
func (l *Logger) Warnf(format string, v ...any) { l.logf("[WRN] ", format, v...) }

// Errorf logs an [ERR] line.
func (l *Logger) Errorf(format string, v ...any) { l.logf("[ERR] ", format, v...) }

// Fatalf logs an [FTL] line. It does not exit; the caller decides.
func (l *Logger) Fatalf(format string, v ...any) { l.logf("[FTL] ", format, v...) }

// Debugf logs a [DBG] line when debug is on.
func (l *Logger) Debugf(format string, v ...any) {
	if l.debug {
		l.logf("[DBG] ", format, v...)
	}
}

// Tracef logs a [TRC] line when trace is on.
func (l *Logger) Tracef(format string, v ...any) {
	if l.trace {
		l.logf("[TRC] ", format, v...)
	}
}

// TraceEnabled reports whether Tracef writes anything, so hot paths can skip
// formatting.
func (l *Logger) TraceEnabled() bool { return l.trace }

func (l *Logger) logf(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == io.Discard {
		return
	}
	b := append(l.buf[:0], l.pid...)
	b = l.now().AppendFormat(b, "2006/01/02 15:04:05.000000 ")
	b = append(b, level...)
	b = fmt.Appendf(b, format, v...)
	b = append(b, '\n')
	_, _ = l.w.Write(b)
	l.buf = b
}
