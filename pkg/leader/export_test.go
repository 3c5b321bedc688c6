package leader

// SubjectMatches is subjectMatches, for the tests.
var SubjectMatches = subjectMatches
