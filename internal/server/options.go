package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/jscluster"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Defaults, from nats-server v2.15.2 (docs/protocol.md section 1.9).
const (
	DefaultHost           = "0.0.0.0"
	DefaultPort           = 4222
	DefaultMaxPayload     = 1 << 20 // bytes
	DefaultMaxControlLine = 4096    // bytes
	DefaultMaxPending     = 64 << 20
	DefaultMaxConnections = 64 * 1024
	DefaultPingInterval   = 2 * time.Minute
	DefaultMaxPingsOut    = 2
	DefaultWriteDeadline  = 10 * time.Second
	// RandomPort as Options.Port asks the kernel for a free port, as
	// nats-server's -p -1 does.
	RandomPort = -1
	// NoStorage as Options.MaxMemoryStore or MaxFileStore allows no stream
	// of that storage type: creates get 10028 or 10047, as nats-server
	// answers with max_memory_store: 0 (the Helm chart's way to turn memory
	// storage off).
	NoStorage = jetstream.NoStorage
)

// Options configures a Server. Zero values mean the default named next to
// each field; Validate fills them in.
type Options struct {
	Host           string // listen address, default "0.0.0.0"
	Port           int    // client port: 0 means 4222, RandomPort (-1) a free port
	ServerName     string // INFO server_name; defaults to the server id
	MaxPayload     int    // bytes per message payload, default 1 MiB
	MaxControlLine int    // bytes per protocol line, default 4096
	MaxPending     int64  // outbound bytes buffered per client before it is a slow consumer, default 64 MiB
	MaxConnections int    // open client connections, default 65536; negative: refuse every client (nats-server's max_connections: 0)
	// MaxSubs is the subscriptions a client connection may hold
	// (max_subscriptions); 0 is no limit, a negative value leaves none
	// (nats-server v2.15.2 applyAccountLimits; docs/security.md, "Limits").
	MaxSubs       int
	PingInterval  time.Duration // idle time before the server PINGs a client, default 2m
	MaxPingsOut   int           // unanswered PINGs before 'Stale Connection', default 2
	WriteDeadline time.Duration // longest a socket write may block, default 10s
	JetStream     bool          // -js: enable JetStream
	StoreDir      string        // -sd: JetStream's directory (data goes in <StoreDir>/jetstream); default <temp dir>/nats
	// MaxMemoryStore and MaxFileStore are the bytes of memory and file
	// storage the streams may reserve and use (max_memory_store,
	// max_file_store). 0 sizes them from the machine as nats-server
	// v2.15.2 sizes an unset limit: three quarters of the memory (or of
	// GOMEMLIMIT when lower; 256 MiB when unknown), and three quarters of
	// the disk space free in the store directory at start plus three
	// quarters of what its streams hold (1 TiB when unknown). NoStorage
	// allows no stream of that type (nats-server's explicit 0).
	MaxMemoryStore int64
	MaxFileStore   int64
	// AckBeforeSyncInterval, when positive, makes file streams acknowledge
	// before the fsync and sync every interval (jetstream's
	// ack_before_sync_interval); 0 acknowledges only fsynced messages.
	AckBeforeSyncInterval time.Duration
	// DefaultMaxConsumers is jetstream { limits { default_max_consumers } }
	// (jetstream.Config.DefaultMaxConsumers): 0 is nats-server's 1000,
	// negative no cap.
	DefaultMaxConsumers int
	// StreamMaxBufferedMsgs and StreamMaxBufferedSize bound each stream's
	// ingest queue, in publishes and in bytes (subject, reply, header and
	// data): past either a publish is answered 429 / 10167 (jetstream
	// max_buffered_msgs and max_buffered_size, nats-server v2.15.2's
	// options of the same names; jetstream.Config.MaxBufferedMsgs). 0 is
	// nats-server's default, 100,000 and 128 MiB; negative no bound.
	StreamMaxBufferedMsgs int
	StreamMaxBufferedSize int64
	// JetStreamDomain is the JetStream domain (jetstream { domain }): a
	// client publish to $JS.<domain>.API.<suffix> is mapped as nats-server
	// v2.15.2 maps it (jsdomain.go), and JetStream names the domain in
	// its answers. "" for none.
	JetStreamDomain string
	// Tags are server_tags, lowercased and trimmed (config.AddTags):
	// shown in /varz and the system account's server information, and
	// matched by stream placement in a cluster (docs/cluster.md,
	// "Placement"; nats-server v2.15.2 Options.Tags).
	Tags []string
	// JetStreamUniqueTag is jetstream { unique_tag }, lowercased: no two
	// replicas of a stream on servers sharing a tag with this prefix
	// (nats-server v2.15.2 JetStreamUniqueTag). "" for no such rule.
	JetStreamUniqueTag string
	// ClientAdvertise, "host" or "host:port", replaces the listener's host
	// and port in INFO (nats-server's client_advertise); a missing, 0 or -1
	// port is the bound port.
	ClientAdvertise string
	// MaxClosedClients is how many closed client connections
	// /connz?state=closed keeps (max_closed_clients): 0 means
	// DefaultMaxClosedClients, negative keeps none.
	MaxClosedClients int
	// JetStreamFS is the file system JetStream stores through; nil is the
	// real one. Tests inject faults and free-space figures with it.
	JetStreamFS vfs.FS
	// RaftTick is the clustered JetStream's Raft tick (0: 100 ms,
	// docs/cluster.md decision 10); tests shorten it.
	RaftTick time.Duration
	// RaftRetain is how many entries a replicated file stream's Raft log
	// keeps behind its checkpoint for a replica that lags (0: 16384); a
	// replica further behind is caught up by a stream snapshot. Not a
	// configuration key: tests shorten it.
	RaftRetain uint64
	// RaftWALSegmentBytes is the size past which the clustered
	// JetStream's Raft WAL starts a new segment (0: 64 MiB, raftnode
	// Config.SegmentBytes). Not a configuration key: tests shorten it.
	RaftWALSegmentBytes int64
	// RaftMaxFrameBytes is the largest frame of the clustered JetStream's
	// Raft transport, and so a replicated stream's largest entry (0: 64
	// MiB, transport.MaxFrameBytes; jscluster Config.MaxFrameBytes). Not
	// a configuration key: tests shrink it (to 2 MiB or more, which the
	// catch-up's 1 MiB chunks fit) so that a batch over it is small.
	RaftMaxFrameBytes int
	// ForceNewCluster forces a new cluster from this server's Raft WAL
	// (--cluster_force_new; jscluster.Config.ForceNew, docs/cluster.md
	// "Forcing a new cluster"): the operator's last resort when a
	// majority of the servers lost their WALs. Not a configuration key:
	// it must be given once, on one server, and removed after.
	ForceNewCluster bool
	// JetStreamClusterHooks, for tests only (nil otherwise), stop the
	// cluster layer at chosen points to interrupt it there
	// (jscluster.Hooks). Not a configuration key.
	JetStreamClusterHooks *jscluster.Hooks
	// Cluster configures the cluster listener and the routes to other
	// servers (cluster_options.go); the zero value means none.
	Cluster ClusterOptions
	// Auth is who may connect and what each user may do: the
	// authorization block, no_auth_user and the accounts' users, as
	// internal/config reads them (docs/security.md); the zero value lets
	// every client in, as nats-server does without them.
	Auth config.Auth
	// TLS is the client listener's TLS (docs/security.md); the zero value
	// is none.
	TLS config.TLS
	// Operator is operator mode: JWT authentication against trusted
	// operators and preloaded accounts (docs/security.md); the zero
	// value is off.
	Operator config.Operator
	Logger   *logger.Logger
}

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = errors.New("server: invalid options")

// Validate fills in defaults and rejects impossible combinations. It
// returns an error wrapping ErrInvalidOptions.
func (o *Options) Validate() error {
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Port < RandomPort || o.Port > 65535 {
		return fmt.Errorf("%w: port %d out of range", ErrInvalidOptions, o.Port)
	}
	fillInt(&o.MaxPayload, DefaultMaxPayload)
	fillInt(&o.MaxControlLine, DefaultMaxControlLine)
	if o.MaxClosedClients == 0 {
		o.MaxClosedClients = DefaultMaxClosedClients
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	fillInt(&o.MaxPingsOut, DefaultMaxPingsOut)
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	fillDuration(&o.PingInterval, DefaultPingInterval)
	fillDuration(&o.WriteDeadline, DefaultWriteDeadline)
	if int64(o.MaxPayload) > o.MaxPending {
		return fmt.Errorf("%w: max_payload (%d) can not exceed max_pending (%d)", ErrInvalidOptions, o.MaxPayload, o.MaxPending)
	}
	if strings.ContainsAny(o.JetStreamDomain, ".*> \t\r\n\f") {
		return fmt.Errorf("%w: invalid domain name %q: may not contain ., *, > or white space", ErrInvalidOptions, o.JetStreamDomain)
	}
	if o.AckBeforeSyncInterval < 0 {
		return fmt.Errorf("%w: negative ack_before_sync_interval %v", ErrInvalidOptions, o.AckBeforeSyncInterval)
	}
	if err := validAdvertise(o.ClientAdvertise); err != nil {
		return err
	}
	if err := o.Cluster.validate(); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = logger.Discard()
	}
	return nil
}

func fillInt(v *int, def int) {
	if *v <= 0 {
		*v = def
	}
}

func fillDuration(v *time.Duration, def time.Duration) {
	if *v <= 0 {
		*v = def
	}
}
