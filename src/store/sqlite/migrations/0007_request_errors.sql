-- Why a request ended without running (arguments that can never fit one command line).
ALTER TABLE requests ADD COLUMN error TEXT;
