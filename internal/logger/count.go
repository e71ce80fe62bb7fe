package logger

import "strconv"

// Count returns n followed by noun, in the plural unless n is 1 or -1:
// "1 Raft group", "2 Raft groups", "0 segments". The plural adds "s", or
// turns a final consonant and "y" into "ies" ("entry", "entries"); a noun
// with another plural is not for Count. For counts in log lines, which
// operators read ("1 Raft groups" reads as a mistake; trial 38).
func Count(n int, noun string) string {
	s := strconv.Itoa(n)
	if n == 1 || n == -1 {
		return s + " " + noun
	}
	if k := len(noun); k >= 2 && noun[k-1] == 'y' && !isVowel(noun[k-2]) {
		return s + " " + noun[:k-1] + "ies"
	}
	return s + " " + noun + "s"
}

// isVowel reports whether c is a lower-case vowel.
func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u':
		return true
	}
	return false
}
