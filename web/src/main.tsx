/** The dashboard's entry: styles, the session, and the app. Screens load on demand (app/routes.ts). */
import { render } from 'preact';
import './styles.css';
import { App } from './app/shell';
import { loadSession } from './app/session';

render(<App />, document.getElementById('app')!);
loadSession().catch(() => undefined);
