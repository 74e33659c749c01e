/**
 * The dashboard's screens: path, title, who sees them, and the chunk to load (each screen is its
 * own dynamic import, so the first screen loads only what it needs). A screen's `show` decides
 * both its place in the navigation and whether it opens at all.
 */
import type { ComponentType } from 'preact';
import type { Access } from './session';

export interface ScreenProps {
  params: Record<string, string>;
}

export interface Screen {
  path: string;
  title: string;
  /** Shown in the navigation (detail pages are not). */
  nav?: boolean;
  show: (a: Access) => boolean;
  load: () => Promise<{ default: ComponentType<ScreenProps> }>;
}

const everyone = () => true;

export const screens: Screen[] = [
  { path: '/overview', title: 'Overview', nav: true, show: (a) => a.globalAdmin, load: () => import('../screens/overview') },
  { path: '/agents', title: 'Agents', nav: true, show: everyone, load: () => import('../screens/agents') },
  { path: '/agents/:did', title: 'Agent', show: everyone, load: () => import('../screens/agent') },
  { path: '/registrations', title: 'Registrations', nav: true, show: (a) => a.globalAdmin, load: () => import('../screens/registrations') },
  { path: '/policies', title: 'Policies', nav: true, show: (a) => a.globalAdmin, load: () => import('../screens/policies') },
  { path: '/people', title: 'People', nav: true, show: everyone, load: () => import('../screens/people') },
  { path: '/channels', title: 'Channels', nav: true, show: everyone, load: () => import('../screens/channels') },
  { path: '/channels/:id', title: 'Channel', show: everyone, load: () => import('../screens/channels') },
  { path: '/models', title: 'Models', nav: true, show: (a) => a.adminLevel || a.atLeast('admin'), load: () => import('../screens/models') },
  { path: '/skills', title: 'Skills', nav: true, show: everyone, load: () => import('../screens/skills') },
  { path: '/workflows', title: 'Workflows', nav: true, show: everyone, load: () => import('../screens/workflows') },
  { path: '/workflows/:id', title: 'Workflow', show: everyone, load: () => import('../screens/workflow') },
  { path: '/workflows/:id/runs/:runId', title: 'Run', show: everyone, load: () => import('../screens/run') },
  { path: '/runs', title: 'Runs', nav: true, show: everyone, load: () => import('../screens/runs') },
  { path: '/usage', title: 'Usage', nav: true, show: everyone, load: () => import('../screens/usage') },
  { path: '/actors', title: 'Actors', nav: true, show: (a) => a.globalAdmin, load: () => import('../screens/actors') },
  { path: '/actors/:kind/:id', title: 'Actor', show: (a) => a.globalAdmin, load: () => import('../screens/actor') },
  { path: '/audit', title: 'Audit', nav: true, show: (a) => a.globalAdmin, load: () => import('../screens/audit') },
  { path: '/sessions', title: 'Sessions', nav: true, show: everyone, load: () => import('../screens/sessions') },
];

/** Where `/` leads. */
export const home = (a: Access) => (a.globalAdmin ? '/overview' : '/agents');
