//! yaql's grammar (yaql.language.parser with YaqlFactory's standard operator table) as a
//! precedence-climbing parser. Tightest first: `.` `?.`; indexing `x[...]`; unary `+` `-`;
//! `=~` `!~`; `*` `/` `mod`; `+` `-`; `>` `<` `>=` `<=` `!=` `=` `in`; `not`; `and`; `or`;
//! `->` (right-associative). Arguments may be `name => value` (keyword arguments, `let`, `dict`,
//! `switch`). Nesting is bounded by `MAX_DEPTH`.

use serde_json::Value;

use super::YaqlError;
use super::lexer::{Spanned, Token, tokenize};

/// Deepest nesting of parentheses, calls, lists and operators an expression may have.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Constant(Value),
    /// A bare name used as a value: the string itself (yaql's KeywordConstant).
    Keyword(String),
    /// `$` (empty name), `$name`, `$1`.
    Variable(String),
    List(Vec<Node>),
    /// `{key => value, ...}`.
    Map(Vec<(Node, Node)>),
    Call {
        name: String,
        args: Vec<Argument>,
    },
    Method {
        receiver: Box<Node>,
        name: String,
        args: Vec<Argument>,
        null_safe: bool,
    },
    Attribute {
        receiver: Box<Node>,
        name: String,
        null_safe: bool,
    },
    Index {
        receiver: Box<Node>,
        args: Vec<Node>,
    },
    Unary {
        operator: &'static str,
        operand: Box<Node>,
    },
    Binary {
        operator: &'static str,
        left: Box<Node>,
        right: Box<Node>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Argument {
    Positional(Node),
    /// `source => value`: a keyword argument when `source` is a bare name.
    Pair(Node, Node),
}

/// Binding power of a binary operator (higher binds tighter) and whether it is right-associative.
fn binary_power(symbol: &str) -> Option<(u8, bool)> {
    let power = match symbol {
        "->" => return Some((10, true)),
        "or" => 20,
        "and" => 30,
        ">" | "<" | ">=" | "<=" | "!=" | "=" | "in" => 40,
        "+" | "-" => 50,
        "*" | "/" | "mod" => 60,
        "=~" | "!~" => 70,
        "[" => 90,
        "." | "?." => 100,
        _ => return None,
    };
    Some((power, false))
}

const NOT_OPERAND: u8 = 35;
const SIGN_OPERAND: u8 = 80;

pub fn parse(expression: &str) -> Result<Node, YaqlError> {
    let tokens = tokenize(expression)?;
    let mut parser = Parser { tokens, next: 0, depth: 0, end: expression.chars().count() };
    let node = parser.expression(0)?;
    match parser.peek() {
        None => Ok(node),
        Some(_) => Err(parser.unexpected()),
    }
}

struct Parser {
    tokens: Vec<Spanned>,
    next: usize,
    depth: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(token, _)| token)
    }

    fn position(&self) -> usize {
        self.tokens.get(self.next).map_or(self.end, |(_, position)| *position)
    }

    fn unexpected(&self) -> YaqlError {
        let message = match self.peek() {
            None => "unexpected end of expression".to_owned(),
            Some(token) => format!("unexpected {}", describe(token)),
        };
        YaqlError::Syntax { position: self.position(), message }
    }

    fn take(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.next).map(|(token, _)| token.clone());
        self.next += 1;
        token
    }

    fn expect(&mut self, symbol: &str) -> Result<(), YaqlError> {
        match self.peek() {
            Some(Token::Symbol(found)) if *found == symbol => {
                self.next += 1;
                Ok(())
            }
            _ => Err(self.unexpected()),
        }
    }

    fn expression(&mut self, minimum: u8) -> Result<Node, YaqlError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(YaqlError::TooDeep { position: self.position() });
        }
        let mut left = self.prefix()?;
        while let Some(Token::Symbol(symbol)) = self.peek() {
            let symbol: &'static str = symbol;
            let Some((power, right_associative)) = binary_power(symbol) else { break };
            if power <= minimum {
                break;
            }
            self.next += 1;
            left = match symbol {
                "[" => {
                    let args = self.positional_list("]")?;
                    Node::Index { receiver: Box::new(left), args }
                }
                "." | "?." => self.member(left, symbol == "?.")?,
                _ => {
                    let right = self.expression(if right_associative { power - 1 } else { power })?;
                    Node::Binary { operator: symbol, left: Box::new(left), right: Box::new(right) }
                }
            };
        }
        self.depth -= 1;
        Ok(left)
    }

    fn prefix(&mut self) -> Result<Node, YaqlError> {
        let node = match self.take() {
            Some(Token::Integer(number)) => Node::Constant(Value::from(number)),
            Some(Token::Float(number)) => Node::Constant(Value::from(number)),
            Some(Token::Text(text)) => Node::Constant(Value::String(text)),
            Some(Token::True) => Node::Constant(Value::Bool(true)),
            Some(Token::False) => Node::Constant(Value::Bool(false)),
            Some(Token::Null) => Node::Constant(Value::Null),
            Some(Token::Variable(name)) => Node::Variable(name),
            Some(Token::Name(name)) => Node::Keyword(name),
            Some(Token::Call(name)) => Node::Call { name, args: self.arguments(")")? },
            Some(Token::Symbol("(")) => {
                let inner = self.expression(0)?;
                self.expect(")")?;
                inner
            }
            Some(Token::Symbol("[")) => Node::List(self.positional_list("]")?),
            Some(Token::Symbol("{")) => Node::Map(self.pairs()?),
            Some(Token::Symbol(operator @ ("+" | "-"))) => {
                Node::Unary { operator, operand: Box::new(self.expression(SIGN_OPERAND)?) }
            }
            Some(Token::Symbol("not")) => {
                Node::Unary { operator: "not", operand: Box::new(self.expression(NOT_OPERAND)?) }
            }
            _ => {
                self.next -= 1;
                return Err(self.unexpected());
            }
        };
        Ok(node)
    }

    /// What follows `.`: an attribute name or a method call.
    fn member(&mut self, receiver: Node, null_safe: bool) -> Result<Node, YaqlError> {
        match self.take() {
            Some(Token::Name(name)) => Ok(Node::Attribute { receiver: Box::new(receiver), name, null_safe }),
            Some(Token::Call(name)) => {
                let args = self.arguments(")")?;
                Ok(Node::Method { receiver: Box::new(receiver), name, args, null_safe })
            }
            _ => {
                self.next -= 1;
                Err(YaqlError::Unsupported {
                    what: format!("only a name or a method call may follow \".\" (position {})", self.position()),
                })
            }
        }
    }

    /// Comma-separated arguments up to `close`, each `value` or `source => value`.
    fn arguments(&mut self, close: &str) -> Result<Vec<Argument>, YaqlError> {
        let mut args = Vec::new();
        if matches!(self.peek(), Some(Token::Symbol(symbol)) if *symbol == close) {
            self.next += 1;
            return Ok(args);
        }
        loop {
            let value = self.expression(0)?;
            if matches!(self.peek(), Some(Token::Symbol("=>"))) {
                self.next += 1;
                args.push(Argument::Pair(value, self.expression(0)?));
            } else {
                args.push(Argument::Positional(value));
            }
            match self.take() {
                Some(Token::Symbol(",")) => continue,
                Some(Token::Symbol(symbol)) if symbol == close => return Ok(args),
                _ => {
                    self.next -= 1;
                    return Err(self.unexpected());
                }
            }
        }
    }

    fn positional_list(&mut self, close: &str) -> Result<Vec<Node>, YaqlError> {
        let position = self.position();
        self.arguments(close)?
            .into_iter()
            .map(|argument| match argument {
                Argument::Positional(node) => Ok(node),
                Argument::Pair(..) => {
                    Err(YaqlError::Syntax { position, message: "\"=>\" inside a list or an index".into() })
                }
            })
            .collect()
    }

    fn pairs(&mut self) -> Result<Vec<(Node, Node)>, YaqlError> {
        let position = self.position();
        self.arguments("}")?
            .into_iter()
            .map(|argument| match argument {
                Argument::Pair(key, value) => Ok((key, value)),
                Argument::Positional(_) => {
                    Err(YaqlError::Syntax { position, message: "a map entry must be key => value".into() })
                }
            })
            .collect()
    }
}

fn describe(token: &Token) -> String {
    match token {
        Token::Integer(number) => number.to_string(),
        Token::Float(number) => number.to_string(),
        Token::Text(text) => format!("string {text:?}"),
        Token::Variable(name) => format!("${name}"),
        Token::Name(name) => format!("\"{name}\""),
        Token::Call(name) => format!("\"{name}(\""),
        Token::True => "true".into(),
        Token::False => "false".into(),
        Token::Null => "null".into(),
        Token::Symbol(symbol) => format!("\"{symbol}\""),
    }
}
