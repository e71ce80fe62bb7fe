package transport

// Names the external tests (package transport_test, which imports the
// server and so cannot be this package) use.
type Hello = hello

var (
	AppendHello       = appendHello
	HelloSummary      = helloSummary
	Frames            = frames
	AppendFrameHeader = appendFrameHeader
)

const (
	RefuseCluster = refuseCluster
	RefusePeer    = refusePeer
	RefuseVersion = refuseVersion
	RefuseAuth    = refuseAuth
	RefuseHello   = refuseHello
)
