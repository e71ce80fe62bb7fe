package config

// Account is one account of the accounts block (accounts.go).
type Account struct {
	Name string
}
