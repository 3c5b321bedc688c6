package node

// MaxBatch is maxBatch, for the tests of package node_test.
const MaxBatch = maxBatch
