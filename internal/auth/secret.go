package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"regexp"
	"strings"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

// bcryptPrefix is how nats-server v2.15.2 recognises a bcrypt hash in a
// password or token (auth.go validBcryptPrefix).
var bcryptPrefix = regexp.MustCompile(`^\$2[abxy]\$\d{2}\$.*`)

// IsBcrypt reports whether a configured password or token is a bcrypt
// hash, to be compared with bcrypt rather than as plain text.
func IsBcrypt(s string) bool {
	return strings.HasPrefix(s, "$") && bcryptPrefix.MatchString(s)
}

// ComparePassword reports whether the client's password (or token)
// matches the configured one: with bcrypt when the configured one is a
// bcrypt hash, otherwise in constant time (nats-server v2.15.2
// comparePasswords).
func ComparePassword(configured, given string) bool {
	if IsBcrypt(configured) {
		return bcrypt.CompareHashAndPassword([]byte(configured), []byte(given)) == nil
	}
	return subtle.ConstantTimeCompare([]byte(configured), []byte(given)) == 1
}

// Nonce sizes: 11 random bytes, sent base64 raw-URL encoded as 15
// characters in INFO nonce (nats-server v2.15.2 nkey.go nonceRawLen,
// nonceLen).
const (
	nonceRawLen = 11
	NonceLen    = 15
)

// NewNonce returns a fresh nonce for INFO: 15 characters of base64
// raw-URL. The client signs these characters (not the decoded bytes).
func NewNonce() []byte {
	var raw [nonceRawLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	out := make([]byte, NonceLen)
	base64.RawURLEncoding.Encode(out, raw[:])
	return out
}

// VerifyNonce reports whether sig, base64 raw-URL (or standard base64)
// encoded, is pubKey's Ed25519 signature of nonce (nats-server v2.15.2
// processClientOrLeafAuthentication). pubKey must be a public user nkey;
// a malformed key or signature fails without reaching the crypto.
func VerifyNonce(pubKey, sig string, nonce []byte) bool {
	if sig == "" || len(nonce) == 0 || !nkeys.IsValidPublicUserKey(pubKey) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	kp, err := nkeys.FromPublicKey(pubKey)
	if err != nil {
		return false
	}
	return kp.Verify(nonce, raw) == nil
}
