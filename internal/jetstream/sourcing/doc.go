// Package sourcing copies the messages of one stream into another on the
// same server: a mirror's origin, or each source of a sourcing stream
// (nats-server v2.15.2 mirrors and sources; docs/engine.md, "Sourcing").
//
// Each stream's own sourcers are a Set (streamrun.SourceSet), one
// sourcer goroutine per origin. A sourcer registers with its origin's
// runtime (streamrun.Stream.Watch), so that interest and work-queue
// retention keep what it has yet to copy and it is woken when the
// origin's durable sequence moves; it reads the origin's store up to
// that sequence and proposes each batch to its own stream as one
// stream.Copy operation (streamrun.Stream.Do), then lets the origin's
// retention remove what was copied (streamrun.Stream.OnSourced) once the
// copies are durable.
//
// A mirror or source with a consumer (ADR-60, durable sourcing) does not
// read the store: its sourcer talks to the origin's durable consumer over
// Env.Transport, as nats-server does (durable.go draws the exchange;
// docs/durable-sourcing.md), and registers no interest with its origin.
// An external mirror or source (`external`: an origin of another account
// or domain) creates a consumer of its own on the origin through the API
// prefix at each setup and reads it the same way (external.go;
// docs/external-sourcing.md). In a cluster these exchanges run only on
// the replica leading the sourcing stream, which finds where they go on
// from the stream's replicated state at each change of leadership
// (lead.go; docs/cluster.md, "Sourcing in a cluster").
package sourcing
