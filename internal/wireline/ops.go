package wireline

// The op codes every protocol's table reserves. Untyped, so that each protocol's own op-code
// type can take them.
const (
	// Bad is the op code of a line that begins no operation name of the table.
	Bad = 0
	// Partial is the op code of a line that is a proper prefix of a name: more bytes needed.
	Partial = 1
)

// Rule says what may follow an operation's name on its line.
type Rule uint8

const (
	// Spaced: at least one space or tab, then the argument (PUB, SUB, RS+, RMSG, -ERR ...).
	Spaced Rule = iota
	// Joined: the argument may follow the name directly, as nats-server accepts
	// "CONNECT{...}" (CONNECT, INFO).
	Joined
	// Bare: everything after the name up to the line end is ignored and not limited
	// (PING, PONG, +OK: nats-server's OP_PING, OP_PONG and OP_PLUS_OK states).
	Bare
)

// Op is one operation of a protocol: its name in lower case and what may follow it.
type Op struct {
	Name string
	Rule Rule
}

// Check completes the match of the operation name at the start of line. op is the only
// operation of the protocol that line's first byte allows, as the protocol's own first-byte
// switch picked it (having compared line[0] already), or Bad or Partial; name is op's name
// (the protocol's table entry). Check compares the rest of line with name case-insensitively
// (ASCII) and returns op when line starts with the whole name, Partial when line is a proper
// prefix of it, and Bad otherwise. Bad and Partial are returned unchanged.
func Check[O ~uint8](line []byte, op O, name string) O {
	if op <= Partial {
		return op
	}
	n := min(len(line), len(name))
	for i := 1; i < n; i++ {
		if Lower(line[i]) != name[i] {
			return Bad
		}
	}
	if len(line) < len(name) {
		return Partial
	}
	return op
}
