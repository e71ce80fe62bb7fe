module github.com/cairnmq/cairn

go 1.26.0

require (
	github.com/klauspost/compress v1.20.3
	github.com/nats-io/jwt/v2 v2.8.2
	github.com/nats-io/nats-server/v2 v2.15.2
	github.com/nats-io/nats.go v1.55.0
	github.com/nats-io/nkeys v0.4.16
	github.com/nats-io/nuid v1.0.1
	golang.org/x/crypto v0.58.0
)

require golang.org/x/sys v0.49.0 // indirect
