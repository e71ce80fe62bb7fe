package transport

// Names the external tests (package transport_test, which imports the
// server and so cannot be this package) use.
type Hello = hello

var (
	AppendHello       = appendHello
	HelloSummary      = helloSummary
	Frames            = frames
	AppendFrameHeader = appendFrameHeader
	IsRefusal         = isRefusal
)

// NewRefusal makes the error a dialer's handshake returns for an -ERR.
func NewRefusal(op, arg string) error { return &refusedError{op: op, arg: arg} }

const (
	RefuseCluster = refuseCluster
	RefusePeer    = refusePeer
	RefuseVersion = refuseVersion
	RefuseAuth    = refuseAuth
	RefuseHello   = refuseHello
)
