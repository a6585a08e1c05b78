package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// Every command takes --log-level and --log-format (parseFlags adds them
// after the command's own flags), and its logs — evictd's own and those of
// client-go, which logs through klog — are one slog stream on stderr.

const (
	flagLogLevel  = "log-level"
	flagLogFormat = "log-format"
)

// klogDebugVerbosity is klog's -v with --log-level debug: client-go's
// V(4) and below ("debug level" by the Kubernetes logging conventions) are
// logged; V(5) and up (each request, each watch event) never are. At the
// other levels klog's verbosity stays 0: warnings and errors only.
const klogDebugVerbosity = "4"

// logSettings are a command's --log-level and --log-format, and the one
// logger they make: one handler per command, so that evictd's lines and
// klog's, written from other goroutines, never interleave within a line.
type logSettings struct {
	level  slog.Level
	format string
	logger *slog.Logger
}

// logLevelValue is --log-level.
type logLevelValue struct{ s *logSettings }

func (v logLevelValue) String() string { return strings.ToLower(v.s.level.String()) }
func (v logLevelValue) Type() string   { return "level" }
func (v logLevelValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug":
		v.s.level = slog.LevelDebug
	case "info":
		v.s.level = slog.LevelInfo
	case "warn", "warning":
		v.s.level = slog.LevelWarn
	case "error":
		v.s.level = slog.LevelError
	default:
		return fmt.Errorf("want debug, info, warn or error")
	}
	return nil
}

// logFormatValue is --log-format.
type logFormatValue struct{ s *logSettings }

func (v logFormatValue) String() string { return v.s.format }
func (v logFormatValue) Type() string   { return "format" }
func (v logFormatValue) Set(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("want text or json")
	}
	v.s.format = s
	return nil
}

// addLogFlags adds --log-level and --log-format to fs, once.
func addLogFlags(fs *pflag.FlagSet) {
	if fs.Lookup(flagLogLevel) != nil {
		return
	}
	s := &logSettings{level: slog.LevelInfo, format: "text"}
	fs.Var(logLevelValue{s}, flagLogLevel, "log only at this level and above: debug, info, warn or error (client-go's logs too)")
	fs.Var(logFormatValue{s}, flagLogFormat, "log format on stderr: text or json")
}

// commandLogger is the logger of the command whose flags fs parsed: on
// fs.Output() (the command's stderr), at its --log-level, in its
// --log-format. Every call returns the same logger.
func CommandLogger(fs *pflag.FlagSet) *slog.Logger {
	addLogFlags(fs)
	s := fs.Lookup(flagLogLevel).Value.(logLevelValue).s
	if s.logger == nil {
		opts := &slog.HandlerOptions{Level: s.level}
		if s.format == "json" {
			s.logger = slog.New(slog.NewJSONHandler(fs.Output(), opts))
		} else {
			s.logger = slog.New(slog.NewTextHandler(fs.Output(), opts))
		}
	}
	return s.logger
}

// commandLoggerTo makes the command's logger write to w instead (at its
// --log-level, in its --log-format), and klog with it: the agent's logs go
// through a queue (runLogger).
func CommandLoggerTo(fs *pflag.FlagSet, w io.Writer) *slog.Logger {
	addLogFlags(fs)
	s := fs.Lookup(flagLogLevel).Value.(logLevelValue).s
	opts := &slog.HandlerOptions{Level: s.level}
	if s.format == "json" {
		s.logger = slog.New(slog.NewJSONHandler(w, opts))
	} else {
		s.logger = slog.New(slog.NewTextHandler(w, opts))
	}
	RouteKlog(s.logger)
	return s.logger
}

// routeKlog sends klog's output — client-go's informers, reflectors and
// leader election log through it — to log, so that a command's stderr is one
// stream in one format. klog is process-wide: the last command to parse its
// flags owns it.
//
// Structured calls (InfoS, ErrorS, contextual loggers) keep their key/value
// pairs through logr's slog adapter; V(n) is slog level -n (V(4) is Debug).
// The printf-style calls (Infof, Warningf, Errorf) reach klog's buffer
// writer with klog's header, whose severity letter keeps a warning a
// warning (klog would hand it to logr as Info) and whose file:line becomes
// the caller attribute.
func RouteKlog(log *slog.Logger) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	v := "0"
	if log.Enabled(context.Background(), slog.LevelDebug) {
		v = klogDebugVerbosity
	}
	_ = fs.Set("v", v) // cannot fail: klog's own flag with a number
	klog.SetLoggerWithOptions(logr.FromSlogHandler(log.Handler()), klog.ContextualLogger(true),
		klog.WriteKlogBuffer(func(data []byte) { logKlogLine(log, data) }))
}

// klogHeader is klog's line header: severity letter, date and time, thread
// id, file:line, "] " (k8s.io/klog/v2's header, "Lmmdd hh:mm:ss.uuuuuu
// threadid file:line] msg").
var klogHeader = regexp.MustCompile(`^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d{6}\s+\d+ ([^\]]*)\] `)

// logKlogLine logs one printf-style klog line at its severity.
func logKlogLine(log *slog.Logger, data []byte) {
	line := strings.TrimSuffix(string(data), "\n")
	level := slog.LevelInfo
	var attrs []any
	if m := klogHeader.FindStringSubmatch(line); m != nil {
		switch m[1] {
		case "W":
			level = slog.LevelWarn
		case "E", "F":
			level = slog.LevelError
		}
		attrs = append(attrs, "caller", m[2])
		line = line[len(m[0]):]
	}
	log.Log(context.Background(), level, line, attrs...)
}
