-- Why a request ended without running (arguments that can never fit one command line).
ALTER TABLE {{schema}}.requests ADD COLUMN error text;
