// Statements name their parameters (:job); named() turns them into $1.. and remembers the
// order, so that a statement and its values cannot drift apart.

export interface Statement {
  readonly text: string;
  readonly names: readonly string[];
}

// Turned into $1.. on first use: a run sends a few of the log's statements, and the store
// names them all when it opens.
class NamedStatement implements Statement {
  #named: { text: string; names: string[] } | null = null;

  constructor(private readonly source: string) {}

  get text(): string {
    return this.#parse().text;
  }

  get names(): readonly string[] {
    return this.#parse().names;
  }

  #parse(): { text: string; names: string[] } {
    if (this.#named === null) {
      const names: string[] = [];
      const text = this.source.replace(/(?<!:):([a-z_]+)\b/g, (_, name: string) => {
        const index = names.includes(name) ? names.indexOf(name) : names.push(name) - 1;
        return `$${index + 1}`;
      });
      this.#named = { text, names };
    }
    return this.#named;
  }
}

export function named(text: string): Statement {
  return new NamedStatement(text);
}
