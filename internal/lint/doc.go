// Package lint holds tests that enforce the code's shape: the import
// direction between cairn's packages (../shared/reference/style.md section
// 5.2) and that the product never imports nats-server. It has no
// non-test code.
package lint
