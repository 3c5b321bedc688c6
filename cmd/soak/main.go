// Command soak runs a deployment of many elections under random faults
// and checks it from outside; this commit holds its checker only.
package main

func main() {}
