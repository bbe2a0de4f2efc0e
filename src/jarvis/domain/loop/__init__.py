"""What every agent runs on: the base class, its settings and options, and the one tool loop
with its budget, guard, context window, executor and REPL cell."""
