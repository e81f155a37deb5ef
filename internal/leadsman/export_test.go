package leadsman

// Waiting is the status the Leadsman looks for.
const Waiting = waiting
