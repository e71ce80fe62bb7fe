package store

import "github.com/cairnmq/cairn/internal/subject"

// The filter rules of LoadNext, LoadLast, SubjectsState and Purge, shared
// so that both engines read a filter the same way.

// FilterAll is the filter that matches every subject.
const FilterAll = ">"

// IsFilterAll reports whether filter matches every subject: "" or ">".
func IsFilterAll(filter string) bool {
	return filter == "" || filter == FilterAll
}

// FiltersAll reports whether a LoadNext filter list matches every subject:
// it is empty or one of its filters IsFilterAll.
func FiltersAll(filters []string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if IsFilterAll(f) {
			return true
		}
	}
	return false
}

// MatchFilter reports whether the stored subject subj matches filter:
// "" and ">" match everything, a literal filter (subject.IsLiteral)
// matches an equal subject, a wildcard filter matches as subject.Match.
func MatchFilter(subj, filter string) bool {
	switch {
	case IsFilterAll(filter):
		return true
	case subject.IsLiteral(filter):
		return subj == filter
	}
	return subject.Match(subj, filter)
}

// MatchFilters reports whether subj matches any of filters (an empty list
// matches everything).
func MatchFilters(subj string, filters []string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if MatchFilter(subj, f) {
			return true
		}
	}
	return false
}
