-- A request's args: a JSON array of strings without NUL characters, as a command line
-- carries them; the CHECK of 0004 sees only that it is an array, and SQLite allows no
-- subquery in a CHECK, so these triggers refuse the rest, for a web application's INSERT as
-- for cronguard's. (Whether text is UTF-8 SQLite cannot tell: a run refuses such a request.)
CREATE TRIGGER requests_args_insert BEFORE INSERT ON requests
WHEN typeof(NEW.args) <> 'text'
  OR (json_valid(NEW.args) AND EXISTS (SELECT 1 FROM json_each(NEW.args) WHERE type <> 'text' OR instr(value, char(0)) > 0))
BEGIN
  SELECT RAISE(ABORT, 'requests.args must be a JSON array of strings without NUL characters');
END;
CREATE TRIGGER requests_args_update BEFORE UPDATE OF args ON requests
WHEN typeof(NEW.args) <> 'text'
  OR (json_valid(NEW.args) AND EXISTS (SELECT 1 FROM json_each(NEW.args) WHERE type <> 'text' OR instr(value, char(0)) > 0))
BEGIN
  SELECT RAISE(ABORT, 'requests.args must be a JSON array of strings without NUL characters');
END;
